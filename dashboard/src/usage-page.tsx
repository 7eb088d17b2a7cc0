import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, ApiError, type ApiKey, type DailyUsage, type UsageSplit } from './api.ts';
import { formatCount, formatUsd } from './format.ts';
import { AccountPicker, useKnownAccounts } from './account-picker.tsx';
import { McpUsageTable } from './mcp-usage.tsx';
import { UsageChart } from './usage-chart.tsx';
import { chartStacks, keyLabel, lastDays, outcomeStacks, seriesName } from './usage-data.ts';
import { LoadFailed, Loading } from './ui.tsx';

type Loaded<T> = { state: 'loading' } | { state: 'error'; message: string } | { state: 'ready'; data: T };

const PERIODS = [7, 30, 90] as const;
const SPLITS: ReadonlyArray<[UsageSplit, string]> = [
  ['model', 'Model'],
  ['key', 'Key'],
];

/** Where the usage of `account` is; the empty name is every account. */
export const usageHref = (account: string) => `#/usage/${encodeURIComponent(account)}`;

const keyNames = (keys: ApiKey[]) => new Map(keys.flatMap((key) => (key.name === null ? [] : [[key.id, key.name] as const])));

const whose = (account: string) => (account === '' ? 'every account' : `account ${account}`);

/** The figures under the charts: every day with calls, one row per model or key. */
function UsageTable({ usage, split, names, caption }: { usage: DailyUsage; split: UsageSplit; names: ReadonlyMap<string, string>; caption: string }) {
  const splitLabel = split === 'model' ? 'Model' : 'Key';
  return (
    <div class="table-wrap">
      <table class="figures">
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Day (UTC)</th>
            <th scope="col">{splitLabel}</th>
            <th scope="col" class="number">
              Requests
            </th>
            <th scope="col" class="number">
              Answered
            </th>
            <th scope="col" class="number">
              Refused
            </th>
            <th scope="col" class="number">
              Input tokens
            </th>
            <th scope="col" class="number">
              Output tokens
            </th>
            <th scope="col" class="number">
              Cost (USD)
            </th>
            <th scope="col" class="number">
              Cache hits
            </th>
            <th scope="col" class="number">
              Saved (USD)
            </th>
          </tr>
        </thead>
        <tbody>
          {usage.data.map((row) =>
            row.series.map((entry, index) => (
              <tr key={`${row.day} ${seriesName(entry, split)}`}>
                {index === 0 && (
                  <th scope="rowgroup" rowSpan={row.series.length} class="time">
                    {row.day}
                  </th>
                )}
                <td>{split === 'key' ? <KeyName id={seriesName(entry, split)} names={names} /> : seriesName(entry, split)}</td>
                <td class="number">{formatCount(entry.requests)}</td>
                <td class="number">{formatCount(entry.answered)}</td>
                <td class="number">{formatCount(entry.refused)}</td>
                <td class="number">{formatCount(entry.input_tokens)}</td>
                <td class="number">{formatCount(entry.output_tokens)}</td>
                <td class="number">{formatUsd(entry.cost_usd)}</td>
                <td class="number">{formatCount(entry.cache_hits)}</td>
                <td class="number">{formatUsd(entry.cost_saved_usd)}</td>
              </tr>
            )),
          )}
        </tbody>
        <tfoot>
          <tr>
            <th scope="row" colSpan={2}>
              Total
            </th>
            <td class="number">{formatCount(usage.totals.requests)}</td>
            <td class="number">{formatCount(usage.totals.answered)}</td>
            <td class="number">{formatCount(usage.totals.refused)}</td>
            <td class="number">{formatCount(usage.totals.input_tokens)}</td>
            <td class="number">{formatCount(usage.totals.output_tokens)}</td>
            <td class="number">{formatUsd(usage.totals.cost_usd)}</td>
            <td class="number">{formatCount(usage.totals.cache_hits)}</td>
            <td class="number">{formatUsd(usage.totals.cost_saved_usd)}</td>
          </tr>
        </tfoot>
      </table>
    </div>
  );
}

/** The share of the requests answered from the response cache. */
const hitRatio = ({ requests, cache_hits: hits }: { requests: number; cache_hits: number }) =>
  requests === 0 ? '0%' : `${((hits / requests) * 100).toFixed(1)}%`;

/** A key in the figures: its name, where it has one, before its id. */
function KeyName({ id, names }: { id: string; names: ReadonlyMap<string, string> }) {
  const name = names.get(id);
  return name === undefined ? (
    <code>{id}</code>
  ) : (
    <>
      {name} <code>{id}</code>
    </>
  );
}

/** What one answer shows: the figures, and the choices they answer. */
interface Shown {
  figures: DailyUsage;
  /** The keys' names by id, when split by key. */
  names: ReadonlyMap<string, string>;
  account: string;
  days: string[];
  split: UsageSplit;
}

/** The figures of one answer: totals, the two charts, and the table under them. */
function UsageFigures({ shown }: { shown: Shown }) {
  const { figures, account, days, split, names } = shown;
  const stacks = useMemo(
    () => chartStacks(figures, days, split).map((stack) => (split === 'key' ? { ...stack, name: keyLabel(stack.name, names) } : stack)),
    [shown],
  );
  const outcomes = useMemo(() => outcomeStacks(figures, days), [shown]);
  const period = `the last ${days.length} days`;
  return (
    <section class="card" aria-labelledby="usage-figures-title">
      <h2 id="usage-figures-title">
        {account === '' ? (
          'Every account'
        ) : (
          <>
            Account <span class="account-name">{account}</span>
          </>
        )}
        , {period}
      </h2>
      <dl class="totals">
        <div>
          <dt>Requests</dt>
          <dd>{formatCount(figures.totals.requests)}</dd>
        </div>
        <div>
          <dt>Answered</dt>
          <dd>{formatCount(figures.totals.answered)}</dd>
        </div>
        <div>
          <dt>Refused or failed</dt>
          <dd>{formatCount(figures.totals.refused)}</dd>
        </div>
        <div>
          <dt>Input tokens</dt>
          <dd>{formatCount(figures.totals.input_tokens)}</dd>
        </div>
        <div>
          <dt>Output tokens</dt>
          <dd>{formatCount(figures.totals.output_tokens)}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>{formatUsd(figures.totals.cost_usd)}</dd>
        </div>
        <div>
          <dt>Cache hits</dt>
          <dd>
            {formatCount(figures.totals.cache_hits)} ({hitRatio(figures.totals)})
          </dd>
        </div>
        <div>
          <dt>Saved by the cache</dt>
          <dd>{formatUsd(figures.totals.cost_saved_usd)}</dd>
        </div>
      </dl>
      <div class="charts">
        <UsageChart title={`Requests per day, by ${split}`} days={days} stacks={stacks} figure="requests" />
        <UsageChart title="Requests per day, answered (2xx) and refused or failed (4xx, 5xx)" days={days} stacks={outcomes} figure="requests" />
        <UsageChart title={`Tokens per day (input and output), by ${split}`} days={days} stacks={stacks} figure="tokens" />
        <UsageChart title={`Cost per day (USD), by ${split}`} days={days} stacks={stacks} figure="cost" />
      </div>
      <UsageTable
        usage={figures}
        split={split}
        names={names}
        caption={`Requests and tokens of ${whose(account)} per day and ${split}, ${period}, and their cost, cache hits and savings`}
      />
    </section>
  );
}

/** Usage: requests and tokens per UTC day over a period, split by model or key, for one account or all. */
export function UsagePage({ account }: { account: string }) {
  const [period, setPeriod] = useState<number>(PERIODS[0]);
  const [split, setSplit] = useState<UsageSplit>('model');
  const [usage, setUsage] = useState<Loaded<Shown>>({ state: 'loading' });
  const [attempt, setAttempt] = useState(0);
  const accounts = useKnownAccounts();

  useEffect(() => {
    let current = true;
    const days = lastDays(period);
    setUsage({ state: 'loading' });
    // Split by key, the keys' names too: a name tells more than an id.
    const names = split === 'key' ? api.keys('').then(keyNames) : Promise.resolve(new Map<string, string>());
    Promise.all([api.dailyUsage(account, days[0] as string, split), names]).then(
      ([figures, names]) => current && setUsage({ state: 'ready', data: { figures, names, account, days, split } }),
      (err: unknown) => current && setUsage({ state: 'error', message: err instanceof ApiError ? err.message : 'Something went wrong.' }),
    );
    // An answer to an earlier choice must not replace the one to the latest.
    return () => {
      current = false;
    };
  }, [account, period, split, attempt]);

  return (
    <>
      <section class="card" aria-labelledby="usage-title">
        <h1 id="usage-title">Usage</h1>
        <AccountPicker id="usage-account" account={account} known={accounts} action="Show usage" href={usageHref} everyAccount="All accounts" />
        <div class="toolbar">
          <label for="usage-period">Period</label>
          <select id="usage-period" value={period} onChange={(event) => setPeriod(Number(event.currentTarget.value))}>
            {PERIODS.map((days) => (
              <option key={days} value={days}>
                Last {days} days
              </option>
            ))}
          </select>
          <label for="usage-split">Split by</label>
          <select id="usage-split" value={split} onChange={(event) => setSplit(event.currentTarget.value as UsageSplit)}>
            {SPLITS.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </div>
        <p class="hint">
          Every model call is one request, refused ones included: answered is a 2xx answer, refused a 4xx or 5xx one (a call refused before its model was read
          has no model). Tokens are the provider's own count, and cost is those tokens at the model's price; a call answered from the response cache costs
          nothing, and saves what its answer cost when it was made. Days are UTC; a call shows here within about a second.
        </p>
        {usage.state === 'loading' && <Loading what="usage" />}
        {usage.state === 'error' && <LoadFailed what="The usage" message={usage.message} onRetry={() => setAttempt(attempt + 1)} />}
        {usage.state === 'ready' && usage.data.figures.data.length === 0 && (
          <p class="empty">
            No model calls by {usage.data.account === '' ? 'any account' : <strong>{usage.data.account}</strong>} in the last {usage.data.days.length} days.
          </p>
        )}
      </section>
      {usage.state === 'ready' && usage.data.figures.data.length > 0 && <UsageFigures shown={usage.data} />}
      <McpUsageTable account={account} since={lastDays(period)[0] as string} />
    </>
  );
}
