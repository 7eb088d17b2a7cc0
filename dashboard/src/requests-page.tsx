import { useState } from 'preact/hooks';
import { api, type RequestFilters } from './api.ts';
import { formatCount, formatUsd } from './format.ts';
import { ShowOlder, useKeysetPages } from './keyset-pages.tsx';
import { LoadFailed, Loading, Time } from './ui.tsx';

const NO_FILTERS: RequestFilters = { account: '', key: '', model: '', status: '' };

/** The request log: recent model calls, newest first, as their usage records keep them (kept 30 days by default). */
export function RequestsPage() {
  const [filters, setFilters] = useState<RequestFilters>(NO_FILTERS);
  const [typed, setTyped] = useState<RequestFilters>(NO_FILTERS);
  const pages = useKeysetPages(filters, api.requests);
  const { list: log, retry } = pages;
  const field = (name: keyof RequestFilters) => (event: Event) => setTyped({ ...typed, [name]: (event.currentTarget as HTMLInputElement).value.trim() });

  return (
    <section class="card" aria-labelledby="requests-title">
      <h1 id="requests-title">Requests</h1>
      <form
        class="toolbar"
        onSubmit={(event) => {
          event.preventDefault();
          setFilters(typed);
        }}
      >
        <label for="requests-account">Account</label>
        <input id="requests-account" type="search" value={typed.account} onInput={field('account')} autocomplete="off" />
        <label for="requests-key">Key id</label>
        <input id="requests-key" type="search" value={typed.key} onInput={field('key')} placeholder="key_…" autocomplete="off" />
        <label for="requests-model">Model</label>
        <input id="requests-model" type="search" value={typed.model} onInput={field('model')} autocomplete="off" />
        <label for="requests-status">Status</label>
        <input id="requests-status" type="search" inputMode="numeric" value={typed.status} onInput={field('status')} placeholder="429" autocomplete="off" />
        <button type="submit">Filter</button>
      </form>
      <p class="hint">
        Every model call, answered, refused or failed, newest first: when (UTC), with which key, to which model and deployment, its status, tokens, cost and
        latency, and its trace id to find it in your tracing backend.
      </p>
      {log.state === 'loading' && <Loading what="the request log" />}
      {log.state === 'error' && <LoadFailed what="The request log" message={log.message} onRetry={retry} />}
      {log.state === 'ready' && log.items.length === 0 && <p class="empty">No calls match.</p>}
      {log.state === 'ready' && log.items.length > 0 && (
        <div class="table-wrap">
          <table class="figures requests">
            <caption>Model calls, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time (UTC)</th>
                <th scope="col">Key</th>
                <th scope="col">Model</th>
                <th scope="col">Deployment</th>
                <th scope="col">Status</th>
                <th scope="col">Tokens in / out</th>
                <th scope="col">Cost</th>
                <th scope="col">Latency</th>
                <th scope="col">Attempts</th>
                <th scope="col">Cache</th>
                <th scope="col">Trace</th>
              </tr>
            </thead>
            <tbody>
              {log.items.map((call) => (
                <tr key={call.request_id}>
                  <td class="time">
                    <Time seconds={Math.floor(call.time)} />
                  </td>
                  <td>
                    <code>{call.key_id}</code> <span class="account-name">{call.account}</span>
                  </td>
                  <td>{call.model ?? '—'}</td>
                  <td>{call.deployment ?? '—'}</td>
                  <td>{call.status}</td>
                  <td>
                    {formatCount(call.input_tokens)} / {formatCount(call.output_tokens)}
                  </td>
                  <td>{formatUsd(call.cost_usd)}</td>
                  <td>{formatCount(Math.round(call.latency_ms))} ms</td>
                  <td>{call.attempts}</td>
                  <td>{call.cache === 'hit' ? `hit, saved ${formatUsd(call.cost_saved_usd)}` : (call.cache ?? '—')}</td>
                  <td>{call.trace_id === null ? '—' : <code>{call.trace_id}</code>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ShowOlder pages={pages} what="calls" />
    </section>
  );
}
