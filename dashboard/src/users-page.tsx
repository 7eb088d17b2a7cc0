import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, type Role, type User } from './api.ts';
import { ErrorAlert, LoadFailed, Loading, Time } from './ui.tsx';

type Users = { state: 'loading' } | { state: 'error'; message: string } | { state: 'ready'; data: User[] };

const ROLES: Role[] = ['admin', 'operator', 'viewer'];

/** The people who signed in through the identity provider: the role each acts with, assigned or from their groups, and who is disabled. */
export function UsersPage() {
  const [users, setUsers] = useState<Users>({ state: 'loading' });
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api.users().then(
      (data) => setUsers({ state: 'ready', data }),
      (err: Error) => setUsers({ state: 'error', message: err.message }),
    );
  useEffect(() => {
    void load();
  }, []);

  const update = async (user: User, body: { role?: Role | null; disabled?: boolean }) => {
    setError(null);
    try {
      const changed = await api.updateUser(user.id, body);
      setUsers((current) =>
        current.state === 'ready' ? { state: 'ready', data: current.data.map((each) => (each.id === changed.id ? changed : each)) } : current,
      );
    } catch (err) {
      setError(err instanceof ApiError ? err.message : 'The change could not be saved.');
    }
  };

  return (
    <section class="card" aria-labelledby="users-title">
      <h1 id="users-title">People</h1>
      <p class="hint">
        Everyone who signed in through the identity provider. A role assigned here wins over the one their groups give; a disabled person's sessions end at
        their next request.
      </p>
      <ErrorAlert message={error} />
      {users.state === 'loading' && <Loading what="people" />}
      {users.state === 'error' && <LoadFailed what="The people" message={users.message} onRetry={() => void load()} />}
      {users.state === 'ready' && users.data.length === 0 && <p class="empty">No one has signed in through the identity provider yet.</p>}
      {users.state === 'ready' && users.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Person</th>
                <th scope="col">Role</th>
                <th scope="col">From their groups</th>
                <th scope="col">Last sign-in</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {users.data.map((user) => (
                <tr key={user.id}>
                  <td class="identity">
                    <strong>{user.name ?? user.email ?? 'Unnamed'}</strong>
                    <br />
                    <span class="muted">{user.email}</span>
                  </td>
                  <td>
                    <select
                      aria-label={`Role of ${user.email ?? user.id}`}
                      value={user.assigned_role ?? ''}
                      onChange={(event) => void update(user, { role: event.currentTarget.value === '' ? null : (event.currentTarget.value as Role) })}
                    >
                      <option value="">From their groups</option>
                      {ROLES.map((role) => (
                        <option value={role}>{role}</option>
                      ))}
                    </select>
                  </td>
                  <td>{user.claim_role ?? <span class="muted">none</span>}</td>
                  <td class="time">
                    <Time seconds={user.last_sign_in_at} />
                  </td>
                  <td class="row-actions">
                    {user.disabled && <span class="badge revoked">disabled</span>}{' '}
                    <button
                      type="button"
                      class={user.disabled ? 'secondary' : 'danger'}
                      onClick={() => void update(user, { disabled: !user.disabled })}
                      aria-label={`${user.disabled ? 'Enable' : 'Disable'} ${user.email ?? user.id}`}
                    >
                      {user.disabled ? 'Enable' : 'Disable'}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
