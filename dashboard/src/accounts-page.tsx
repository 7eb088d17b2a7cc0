import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, type Account } from './api.ts';
import { accountHref } from './app.tsx';
import { formatBytes, formatCount, formatShare } from './format.ts';
import { AccountPicker, useKnownAccounts } from './account-picker.tsx';
import { AccountBudgets } from './budgets.tsx';
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

/** Accounts: pick one (from those with keys, or by name), see what it keeps and created today. */
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
        {known.length > 0 && (
          <nav aria-label="Accounts with keys" class="chips">
            {known.map((known) => (
              <a key={known} href={accountHref(known)} aria-current={known === account ? 'page' : undefined}>
                {known}
              </a>
            ))}
          </nav>
        )}
        {figures.state === 'idle' && <p class="empty">Pick an account to see its files, bytes and today's creations against its limits.</p>}
        {figures.state === 'loading' && <Loading what="the account" />}
        {figures.state === 'error' && <ErrorAlert message={`The account could not be loaded: ${figures.message}`} />}
      </section>
      {figures.state === 'ready' && <AccountFigures account={figures.data} />}
      {figures.state === 'ready' && <AccountBudgets account={figures.data.account} />}
    </>
  );
}
