import { useState } from 'preact/hooks';
import { api, type AuditEntry, type AuditFilters } from './api.ts';
import { ShowOlder, useKeysetPages } from './keyset-pages.tsx';
import { LoadFailed, Loading, Time } from './ui.tsx';
import { formatTime } from './format.ts';

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
  ['user.updated', 'Person changed'],
  ['budget.alert_sent', 'Budget alert'],
];
const actionName = (action: string) => ACTIONS.find(([value]) => value === action)?.[1] ?? action;

const NO_FILTERS: AuditFilters = { action: '', key: '', account: '' };

/** Who acted, as stored: every string is text to Preact, escaped, never markup. */
function Actor({ actor }: { actor: AuditEntry['actor'] }) {
  if (actor.type === 'cli') return <>Command line{actor.name !== null && <> ({actor.name})</>}</>;
  if (actor.type === 'user') return <>{actor.name ?? 'A person'}</>;
  if (actor.type === 'gateway') return <>Gateway</>;
  return (
    <>
      {actor.name ?? 'Unnamed token'} <code>{actor.id}</code>
    </>
  );
}

/** A value as the row shows it: a time (`…_at`) as a time, none for null, a list or text as it is. */
function shown(field: string, value: unknown): string {
  if (value === null || value === undefined) return 'none';
  if (field.endsWith('_at') && typeof value === 'number') return formatTime(value);
  if (Array.isArray(value)) return value.join(', ');
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** Each changed value, an object's (a key's limits) one field at a time: `limits.cost_per_day`. */
function changedLines(changes: NonNullable<AuditEntry['changes']>): Array<[string, unknown, unknown]> {
  return Object.entries(changes).flatMap(([field, { from, to }]): Array<[string, unknown, unknown]> => {
    const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
    if (!isObject(from) && !isObject(to)) return [[field, from, to]];
    const before = isObject(from) ? from : {};
    const after = isObject(to) ? to : {};
    return [...new Set([...Object.keys(before), ...Object.keys(after)])]
      .filter((name) => JSON.stringify(before[name] ?? null) !== JSON.stringify(after[name] ?? null))
      .map((name) => [`${field}.${name}`, before[name], after[name]]);
  });
}

/** The fields an action set, each with its value before and after when the entry has them. */
function Changes({ entry }: { entry: AuditEntry }) {
  if (!entry.changes) return <>{entry.fields.join(', ')}</>;
  return (
    <ul class="changes">
      {changedLines(entry.changes).map(([field, from, to]) => (
        <li key={field}>
          {field}: <del>{shown(field, from)}</del> → <ins>{shown(field, to)}</ins>
        </li>
      ))}
    </ul>
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
      {entry.user_id !== null && <code>{entry.user_id}</code>}
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
        Every change made through the admin API, the dashboard or the command line, newest first: who made it (the person signed in, or the admin token, a
        dashboard session opened with one counting as it), the values before and after, when (UTC) and from which address. Never a key or a token.
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
                <th scope="col">Changes</th>
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
                  <td class="key">
                    <Target entry={entry} />
                  </td>
                  <td>
                    <Changes entry={entry} />
                  </td>
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
