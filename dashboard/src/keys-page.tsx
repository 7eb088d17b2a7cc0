import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, may, type ApiKey, type Catalog, type NewKey } from './api.ts';
import { accountHref } from './app.tsx';
import { KeySpend, useKeySpend } from './budgets.tsx';
import { formatCount, formatUsd } from './format.ts';
import { KeyForm } from './key-form.tsx';
import { KeyIdentity, RotationLinks } from './key-identity.tsx';
import { Modal } from './modal.tsx';
import { SecretDialog } from './secret.tsx';
import { Actions, ErrorAlert, LoadFailed, Loading, Time } from './ui.tsx';

type Loaded<T> = { state: 'loading' } | { state: 'error'; message: string } | { state: 'ready'; data: T };

const GRACE_PERIODS = [
  [0, 'None: the old key stops at once'],
  [3600, '1 hour'],
  [86_400, '1 day'],
  [604_800, '7 days'],
] as const;

const message = (err: unknown) => (err instanceof ApiError ? err.message : 'Something went wrong.');

function limitsText(key: ApiKey): string {
  if (key.limits === null) return 'defaults';
  const { requests_per_minute: rpm, tokens_per_minute: tpm, tokens_per_day: tpd } = key.limits;
  return [rpm && `${formatCount(rpm)} req/min`, tpm && `${formatCount(tpm)} tok/min`, tpd && `${formatCount(tpd)} tok/day`, budgetText(key.limits)]
    .filter(Boolean)
    .join(', ');
}

function budgetText({ cost_per_day: day, cost_per_month: month }: NonNullable<ApiKey['limits']>): string {
  return [day && `${formatUsd(day)}/day`, month && `${formatUsd(month)}/month`].filter(Boolean).join(', ');
}

function Status({ status }: { status: ApiKey['status'] }) {
  return <span class={`badge ${status}`}>{status}</span>;
}

/** Keys, listed by account: create (secret shown once), revoke, rotate. */
export function KeysPage() {
  const [filter, setFilter] = useState('');
  const [account, setAccount] = useState('');
  const [keys, setKeys] = useState<Loaded<ApiKey[]>>({ state: 'loading' });
  const [catalog, setCatalog] = useState<Catalog | null>(null);
  const [creating, setCreating] = useState(false);
  const [editing, setEditing] = useState<ApiKey | null>(null);
  const [secret, setSecret] = useState<{ created: NewKey; title: string } | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const [rotating, setRotating] = useState<ApiKey | null>(null);
  const [grace, setGrace] = useState(3600);
  const [actionError, setActionError] = useState<string | null>(null);
  const spend = useKeySpend(keys);

  const load = (which = account) => {
    setKeys({ state: 'loading' });
    api.keys(which).then(
      (data) => setKeys({ state: 'ready', data }),
      (err: unknown) => setKeys({ state: 'error', message: message(err) }),
    );
  };
  useEffect(() => {
    load();
    api.catalog().then(setCatalog, () => setCatalog(null));
  }, []);

  const find = (text: string) => {
    setFilter(text);
    setAccount(text);
    load(text);
  };
  const show = (event: Event) => {
    event.preventDefault();
    find(filter.trim());
  };
  const closeRevoke = () => {
    setRevoking(null);
    setActionError(null);
  };
  const closeRotate = () => {
    setRotating(null);
    setActionError(null);
  };
  const revoke = async (key: ApiKey) => {
    setActionError(null);
    try {
      await api.revokeKey(key.id);
      closeRevoke();
      load();
    } catch (err) {
      setActionError(message(err));
    }
  };
  const rotate = async (key: ApiKey) => {
    setActionError(null);
    try {
      const created = await api.rotateKey(key.id, grace);
      closeRotate();
      setSecret({ created, title: 'Key rotated' });
      load();
    } catch (err) {
      setActionError(message(err));
    }
  };

  return (
    <>
      {/* Above the list, where it is seen however many keys there are. */}
      {(creating || editing) && catalog && (
        <KeyForm
          catalog={catalog}
          // The text found by, when it is an account shown: a name or key id is no account for a new key.
          account={keys.state === 'ready' && keys.data.some((key) => key.account === account) ? account : ''}
          {...(editing && { editing })}
          onCancel={() => {
            setCreating(false);
            setEditing(null);
          }}
          onCreated={(created) => {
            setCreating(false);
            setSecret({ created, title: 'Key created' });
            load();
          }}
          onUpdated={() => {
            setEditing(null);
            load();
          }}
        />
      )}
      <section class="card" aria-labelledby="keys-title">
        <div class="heading">
          <h1 id="keys-title">Keys</h1>
          {may('change') && (
            <button
              type="button"
              onClick={() => {
                setEditing(null);
                setCreating(true);
              }}
              disabled={creating || catalog === null}
            >
              New key
            </button>
          )}
        </div>
        <form class="toolbar" onSubmit={show} role="search">
          <label for="filter">Find</label>
          <input id="filter" placeholder="Account, key id or name: its start" value={filter} onInput={(event) => setFilter(event.currentTarget.value)} />
          <button type="submit" class="secondary">
            Show keys
          </button>
        </form>
        {keys.state === 'loading' && <Loading what="keys" />}
        {keys.state === 'error' && <LoadFailed what="The keys" message={keys.message} onRetry={() => load()} />}
        {keys.state === 'ready' && keys.data.length === 0 && (
          <p class="empty">
            {account === '' ? (
              'No keys yet. Create one with New key.'
            ) : (
              <>
                No key's account, id or name starts with <strong>{account}</strong>.
              </>
            )}
          </p>
        )}
        {keys.state === 'ready' && keys.data.length > 0 && (
          <div class="table-wrap">
            <table>
              <caption class="visually-hidden">{account === '' ? 'Every key' : `Keys found by ${account}`}</caption>
              <thead>
                <tr>
                  <th scope="col">Account</th>
                  <th scope="col">Key</th>
                  <th scope="col">Status</th>
                  <th scope="col">Scopes</th>
                  <th scope="col">Models</th>
                  <th scope="col">Limits</th>
                  <th scope="col">Spend (UTC)</th>
                  <th scope="col">Created (UTC)</th>
                  <th scope="col">Expires (UTC)</th>
                  <th scope="col">Last used (UTC)</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {keys.data.map((key) => (
                  <tr key={key.id}>
                    <td>
                      <a href={accountHref(key.account)}>{key.account}</a>
                    </td>
                    <td class="key">
                      <KeyIdentity apiKey={key} prefix={catalog?.key_prefix} />
                    </td>
                    <td>
                      <Status status={key.status} />
                      <RotationLinks apiKey={key} onFind={find} />
                    </td>
                    <td class="scopes">{key.scopes.length === (catalog?.scopes.length ?? -1) ? 'every scope' : key.scopes.join(', ')}</td>
                    <td>{key.models === null ? 'every model' : key.models.join(', ') || 'none'}</td>
                    <td>{limitsText(key)}</td>
                    <td>
                      <KeySpend id={key.id} spend={spend.get(key.id)} limits={key.limits} />
                    </td>
                    <td class="time">
                      <Time seconds={key.created_at} />
                    </td>
                    <td class="time">
                      <Time seconds={key.expires_at} />
                    </td>
                    <td class="time">
                      <Time seconds={key.last_used_at} />
                    </td>
                    <td class="row-actions">
                      {key.status === 'active' && may('change') && (
                        <>
                          <button
                            type="button"
                            class="secondary"
                            onClick={() => {
                              setCreating(false);
                              setEditing(key);
                            }}
                            aria-label={`Edit ${key.id}`}
                          >
                            Edit
                          </button>
                          {/* The API rotates a key once: a replaced key (in its grace) is refused, its replacement revoked or not. */}
                          {key.replaced_by === null && (
                            <button type="button" class="secondary" onClick={() => setRotating(key)} aria-label={`Rotate ${key.id}`}>
                              Rotate
                            </button>
                          )}
                          <button type="button" class="danger" onClick={() => setRevoking(key)} aria-label={`Revoke ${key.id}`}>
                            Revoke
                          </button>
                        </>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>

      {secret && <SecretDialog created={secret.created} title={secret.title} onClose={() => setSecret(null)} />}

      {revoking && (
        <Modal title="Revoke this key?" onClose={closeRevoke}>
          <p>
            <code>{revoking.id}</code> of account <strong>{revoking.account}</strong> will be refused at once, by every server. This cannot be undone.
          </p>
          <ErrorAlert message={actionError} />
          <Actions onCancel={closeRevoke}>
            <button type="button" class="danger" onClick={() => revoke(revoking)}>
              Revoke key
            </button>
          </Actions>
        </Modal>
      )}

      {rotating && (
        <Modal title="Rotate this key" onClose={closeRotate}>
          <p>
            A new key replaces <code>{rotating.id}</code>, with the same account, scopes, models, limits and expiry. The old key keeps working for the grace
            period, then stops.
          </p>
          <label for="grace">Grace period</label>
          <select id="grace" value={grace} onChange={(event) => setGrace(Number(event.currentTarget.value))}>
            {GRACE_PERIODS.map(([seconds, label]) => (
              <option key={seconds} value={seconds}>
                {label}
              </option>
            ))}
          </select>
          <ErrorAlert message={actionError} />
          <Actions onCancel={closeRotate}>
            <button type="button" onClick={() => rotate(rotating)}>
              Rotate key
            </button>
          </Actions>
        </Modal>
      )}
    </>
  );
}
