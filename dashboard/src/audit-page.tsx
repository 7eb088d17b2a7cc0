import { useState } from 'preact/hooks';
import { api, type AuditEntry, type AuditFilters } from './api.ts';
import { ShowOlder, useKeysetPages } from './keyset-pages.tsx';
import { LoadFailed, Loading, Time } from './ui.tsx';

/** The actions as the page names them; the value is the API's. */
const ACTIONS: ReadonlyArray<[string, string]> = [
  ['key.created', 'Key created'],
  ['key.updated', 'Key changed'],
  ['key.rotated', 'Key rotated'],
  ['key.revoked', 'Key revoked'],
  ['admin_token.created', 'Admin token created'],
  ['admin_token.revoked', 'Admin token revoked'],
  ['session.opened', 'Dashboard log-in'],
  ['session.closed', 'Dashboard log-out'],
  ['account.limits_set', 'Account budgets set'],
];
const actionName = (action: string) => ACTIONS.find(([value]) => value === action)?.[1] ?? action;

const NO_FILTERS: AuditFilters = { action: '', key: '', account: '' };

/** Who acted, as stored: every string is text to Preact, escaped, never markup. */
function Actor({ actor }: { actor: AuditEntry['actor'] }) {
  if (actor.type === 'cli') return <>Command line{actor.name !== null && <> ({actor.name})</>}</>;
  return (
    <>
      {actor.name ?? 'Unnamed token'} <code>{actor.id}</code>
    </>
  );
}

/** What an action was done to: a key (and the key a rotation made), an admin token, an account. */
function Target({ entry }: { entry: AuditEntry }) {
  return (
    <>
      {entry.key_id !== null && <code>{entry.key_id}</code>}
      {entry.replacement_key_id !== null && (
        <>
          {' → '}
          <code>{entry.replacement_key_id}</code>
        </>
      )}
      {entry.admin_token_id !== null && <code>{entry.admin_token_id}</code>}
      {entry.account !== null && <span class="account-name"> {entry.account}</span>}
    </>
  );
}

/** The audit log: who did what to keys, admin tokens, sessions and budgets, when and from where; newest first. */
export function AuditPage() {
  const [filters, setFilters] = useState<AuditFilters>(NO_FILTERS);
  const [typed, setTyped] = useState<AuditFilters>(NO_FILTERS);
  const pages = useKeysetPages(filters, api.audit);
  const { list: log, retry } = pages;
  const field = (name: keyof AuditFilters) => (event: Event) => setTyped({ ...typed, [name]: (event.currentTarget as HTMLInputElement).value.trim() });

  return (
    <section class="card" aria-labelledby="audit-title">
      <h1 id="audit-title">Audit log</h1>
      <form
        class="toolbar"
        onSubmit={(event) => {
          event.preventDefault();
          setFilters(typed);
        }}
      >
        <label for="audit-action">Action</label>
        <select id="audit-action" value={typed.action} onChange={field('action')}>
          <option value="">Every action</option>
          {ACTIONS.map(([value, label]) => (
            <option key={value} value={value}>
              {label}
            </option>
          ))}
        </select>
        <label for="audit-key">Key id</label>
        <input id="audit-key" type="search" value={typed.key} onInput={field('key')} placeholder="key_…" autocomplete="off" />
        <label for="audit-account">Account</label>
        <input id="audit-account" type="search" value={typed.account} onInput={field('account')} autocomplete="off" />
        <button type="submit">Filter</button>
      </form>
      <p class="hint">
        Every change made through the admin API, the dashboard or the command line, newest first: who made it (the admin token, a dashboard
        session counting as its token), when (UTC) and from which address. Never a key or a token.
      </p>
      {log.state === 'loading' && <Loading what="the audit log" />}
      {log.state === 'error' && <LoadFailed what="The audit log" message={log.message} onRetry={retry} />}
      {log.state === 'ready' && log.items.length === 0 && <p class="empty">No admin actions match.</p>}
      {log.state === 'ready' && log.items.length > 0 && (
        <div class="table-wrap">
          <table class="figures audit">
            <caption>Admin actions, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time (UTC)</th>
                <th scope="col">Action</th>
                <th scope="col">By</th>
                <th scope="col">On</th>
                <th scope="col">Fields</th>
                <th scope="col">From</th>
              </tr>
            </thead>
            <tbody>
              {log.items.map((entry) => (
                <tr key={entry.id}>
                  <td class="time">
                    <Time seconds={entry.at} />
                  </td>
                  <td>{actionName(entry.action)}</td>
                  <td>
                    <Actor actor={entry.actor} />
                  </td>
                  <td>
                    <Target entry={entry} />
                  </td>
                  <td>{entry.fields.join(', ')}</td>
                  <td>{entry.address ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ShowOlder pages={pages} what="actions" />
    </section>
  );
}
