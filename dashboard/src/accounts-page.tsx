import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, type Account, type AccountSummary, type ApiKey } from './api.ts';
import { accountHref } from './app.tsx';
import { formatBytes, formatCount, formatShare, formatUsd } from './format.ts';
import { AccountPicker, useKnownAccounts } from './account-picker.tsx';
import { AccountBudgets, KeySpend, useKeySpend } from './budgets.tsx';
import { KeyIdentity } from './key-identity.tsx';
import { usageHref } from './usage-page.tsx';
import { ErrorAlert, Loading } from './ui.tsx';

type Loaded<T> = { state: 'idle' } | { state: 'loading' } | { state: 'error'; message: string } | { state: 'ready'; data: T };

/** One figure against its limit: a native <meter>, its label and the numbers in words. */
function Gauge({ label, value, max, format }: { label: string; value: number | null; max: number; format: (value: number) => string }) {
  const id = `gauge-${label.toLowerCase().replace(/\W+/g, '-')}`;
  if (value === null) {
    return (
      <div class="gauge">
        <span class="gauge-label">{label}</span>
        <span class="muted">not counted by this server</span>
      </div>
    );
  }
  const share = formatShare(value, max);
  return (
    <div class="gauge">
      <label for={id} class="gauge-label">
        {label}
      </label>
      <meter id={id} min={0} max={max} low={max * 0.75} high={max * 0.9} optimum={0} value={value}>
        {share}
      </meter>
      <span class="gauge-figures">
        <strong>{format(value)}</strong> of {format(max)} <span class="muted">({share})</span>
      </span>
    </div>
  );
}

/** An account's figures beside its limits, and the way to its usage. */
function AccountFigures({ account }: { account: Account }) {
  const { limits } = account;
  return (
    <section class="card" aria-labelledby="figures-title">
      <h2 id="figures-title">
        Account <span class="account-name">{account.account}</span>
      </h2>
      <div class="gauges">
        <Gauge label="Files kept" value={account.files} max={limits.max_files} format={formatCount} />
        <Gauge label="Bytes kept" value={account.bytes} max={limits.max_stored_bytes} format={formatBytes} />
        <Gauge label="Files created today (UTC)" value={account.creations_today} max={limits.creates_per_day} format={formatCount} />
        <Gauge label="Bytes created today (UTC)" value={account.bytes_today} max={limits.bytes_per_day} format={formatBytes} />
      </div>
      <p class="hint">
        Also limited: {formatCount(limits.creates_per_minute)} file creations per minute, {formatBytes(limits.max_file_bytes)} per file.
      </p>
      <p>
        <a href={usageHref(account.account)}>Model calls of this account: requests and tokens per day</a>
      </p>
    </section>
  );
}

/** Every account that has a key, one row each; its name opens its figures below. */
function AccountList({ current }: { current: string }) {
  const [accounts, setAccounts] = useState<Loaded<AccountSummary[]>>({ state: 'loading' });
  useEffect(() => {
    api.accounts().then(
      (data) => setAccounts({ state: 'ready', data }),
      (err: unknown) => setAccounts({ state: 'error', message: err instanceof ApiError ? err.message : 'Something went wrong.' }),
    );
  }, []);
  if (accounts.state === 'loading' || accounts.state === 'idle') return <Loading what="the accounts" />;
  if (accounts.state === 'error') return <ErrorAlert message={`The accounts could not be loaded: ${accounts.message}`} />;
  if (accounts.data.length === 0) return <p class="empty">No account has a key yet.</p>;
  const month = (value: number | null) => (value === null ? '—' : formatCount(value));
  return (
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">Every account with a key</caption>
        <thead>
          <tr>
            <th scope="col">Account</th>
            <th scope="col">Active keys</th>
            <th scope="col">Files</th>
            <th scope="col">Bytes</th>
            <th scope="col">Requests this month (UTC)</th>
            <th scope="col">Input tokens this month</th>
            <th scope="col">Output tokens this month</th>
            <th scope="col">Cost this month (USD)</th>
          </tr>
        </thead>
        <tbody>
          {accounts.data.map((row) => (
            <tr key={row.account}>
              <th scope="row">
                <a href={accountHref(row.account)} aria-current={row.account === current ? 'page' : undefined}>
                  {row.account}
                </a>
              </th>
              <td>{formatCount(row.keys)}</td>
              <td>{formatCount(row.files)}</td>
              <td>{formatBytes(row.bytes)}</td>
              <td>{month(row.requests_this_month)}</td>
              <td>{month(row.input_tokens_this_month)}</td>
              <td>{month(row.output_tokens_this_month)}</td>
              <td>{row.cost_usd_this_month === null ? '—' : formatUsd(row.cost_usd_this_month)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The account's keys: each one's identity, status and spend against its budgets; the key list edits them. */
function AccountKeys({ account }: { account: string }) {
  const [keys, setKeys] = useState<Loaded<ApiKey[]>>({ state: 'loading' });
  const spend = useKeySpend(account);
  useEffect(() => {
    setKeys({ state: 'loading' });
    api.accountKeys(account).then(
      (data) => setKeys({ state: 'ready', data }),
      (err: unknown) => setKeys({ state: 'error', message: err instanceof ApiError ? err.message : 'Something went wrong.' }),
    );
  }, [account]);
  return (
    <section class="card" aria-labelledby="account-keys-title">
      <h2 id="account-keys-title">Keys of this account</h2>
      {keys.state === 'loading' && <Loading what="the keys" />}
      {keys.state === 'error' && <ErrorAlert message={`The keys could not be loaded: ${keys.message}`} />}
      {keys.state === 'ready' && keys.data.length === 0 && <p class="empty">This account has no key.</p>}
      {keys.state === 'ready' && keys.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">The keys of {account}</caption>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Status</th>
                <th scope="col">Spend (UTC)</th>
              </tr>
            </thead>
            <tbody>
              {keys.data.map((key) => (
                <tr key={key.id}>
                  <td class="key">
                    <KeyIdentity apiKey={key} prefix={undefined} />
                  </td>
                  <td>
                    <span class={`badge ${key.status}`}>{key.status}</span>
                  </td>
                  <td>
                    <KeySpend id={key.id} spend={spend.get(key.id)} limits={key.limits} />
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

/** Accounts: every account with a key in a list; pick one there or by name, see what it keeps and created today. */
export function AccountsPage({ account }: { account: string }) {
  const [figures, setFigures] = useState<Loaded<Account>>({ state: 'idle' });
  const known = useKnownAccounts();

  useEffect(() => {
    if (account === '') return setFigures({ state: 'idle' });
    setFigures({ state: 'loading' });
    api.account(account).then(
      (data) => setFigures({ state: 'ready', data }),
      (err: unknown) => setFigures({ state: 'error', message: err instanceof ApiError ? err.message : 'Something went wrong.' }),
    );
  }, [account]);

  return (
    <>
      <section class="card" aria-labelledby="accounts-title">
        <h1 id="accounts-title">Accounts</h1>
        <AccountPicker id="account" account={account} known={known} action="Show account" href={accountHref} />
        <AccountList current={account} />
        {figures.state === 'idle' && <p class="empty">Pick an account to see its files, bytes and today's creations against its limits.</p>}
        {figures.state === 'loading' && <Loading what="the account" />}
        {figures.state === 'error' && <ErrorAlert message={`The account could not be loaded: ${figures.message}`} />}
      </section>
      {figures.state === 'ready' && <AccountFigures account={figures.data} />}
      {figures.state === 'ready' && <AccountBudgets account={figures.data.account} />}
      {figures.state === 'ready' && <AccountKeys account={figures.data.account} />}
    </>
  );
}
