import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, may, type AccountLimits, type ApiKey, type AuditEntry } from './api.ts';
import { formatShare, formatUsd } from './format.ts';
import { percentList } from './key-form.tsx';
import { utcDay } from './usage-data.ts';
import { ErrorAlert, Loading } from './ui.tsx';

/** Spend in USD this UTC day and month. */
export interface Spend {
  day: number;
  month: number;
}

/** The first day of the current UTC month, `2030-01-01`. */
const monthStart = (nowMs = Date.now()) => `${utcDay(nowMs).slice(0, 7)}-01`;

/**
 * Each key's spend this UTC day and month, from the usage report of every account (keys without
 * calls: none), so that a list found by a name or a key id has its spend too; reloaded when
 * `version` changes. Failing, it is an empty map: the key list shows without spend.
 */
export function useKeySpend(version: unknown): Map<string, Spend> {
  const [spend, setSpend] = useState(new Map<string, Spend>());
  useEffect(() => {
    let current = true;
    const today = utcDay(Date.now());
    api.keyUsage(monthStart()).then(
      (usage) => {
        if (!current) return;
        const byKey = new Map<string, Spend>();
        for (const row of usage.data) byKey.set(row.key, { month: row.cost_usd, day: row.series.find((entry) => entry.day === today)?.cost_usd ?? 0 });
        setSpend(byKey);
      },
      () => current && setSpend(new Map()),
    );
    return () => {
      current = false;
    };
  }, [version]);
  return spend;
}

type Period = 'day' | 'month';

const PERIOD_END = { day: "by the day's end", month: "by the month's end" } as const;

/**
 * Where the spend of the current UTC day or month ends at the rate so far: a straight line from
 * the period's start through `spent` now (the first minute counted as a whole one).
 */
export function forecast(spent: number, per: Period, nowMs = Date.now()): number {
  const now = new Date(nowMs);
  const start = per === 'day' ? Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) : Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const end = per === 'day' ? start + 86_400_000 : Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
  return (spent * (end - start)) / Math.max(nowMs - start, 60_000);
}

/** The forecast of a period's spend against its budget: `→ $2.10 by the day's end (210%)`; nothing without a budget or spend. */
function Forecast({ spent, budget, per }: { spent: number; budget: number | null; per: Period }) {
  if (budget === null || spent === 0) return null;
  const expected = forecast(spent, per);
  return (
    <span class={`forecast ${expected >= budget ? 'over' : ''}`} title="At the rate so far: a straight line from the period's start">
      → {formatUsd(Math.round(expected * 100) / 100)} {PERIOD_END[per]} ({formatShare(expected, budget)})
    </span>
  );
}

/** What calls under way hold, as a share of the tightest budget: `$0.05 reserved (5%)`. */
function Reserved({ reserved, budget }: { reserved: number; budget: number | null }) {
  if (reserved === 0) return null;
  return (
    <span class="muted" title="What the calls under way hold: each one's maximum cost, until it ends">
      {formatUsd(reserved)} reserved{budget !== null && ` (${formatShare(reserved, budget)})`}
    </span>
  );
}

/** What the key's calls under way hold (USD), read when the key has a budget: `null` until read, or without one. */
function useKeyReserved(id: string, budgeted: boolean): number | null {
  const [reserved, setReserved] = useState<number | null>(null);
  useEffect(() => {
    let current = true;
    setReserved(null);
    if (budgeted)
      api.keySpend(id).then(
        (spend) => current && setReserved(spend.reserved),
        () => undefined,
      );
    return () => {
      current = false;
    };
  }, [id, budgeted]);
  return reserved;
}

/** Spend against a budget as text: `$1.20 of $5.00 (24%)`, or the spend alone without a budget. */
function against(spent: number, budget: number | null): string {
  return budget === null ? formatUsd(spent) : `${formatUsd(spent)} of ${formatUsd(budget)} (${formatShare(spent, budget)})`;
}

/**
 * Where spend stands against a budget: `over` at 100 % and past (calls are refused), `near` from
 * 80 %, else none; said in words too, not by colour alone.
 */
export function budgetState(spent: number, budget: number | null): 'over' | 'near' | null {
  if (budget === null) return null;
  if (spent >= budget) return 'over';
  return spent >= budget * 0.8 ? 'near' : null;
}

const STATE_WORDS = { over: 'over budget', near: 'near budget' } as const;

/** One spend against its budget, coloured and named when near or over it. */
function SpendLine({ period, spent, budget }: { period: string; spent: number; budget: number | null }) {
  const state = budgetState(spent, budget);
  return (
    <span class={state ?? undefined}>
      {period} {against(spent, budget)}
      {state && <strong class="budget-state"> {STATE_WORDS[state]}</strong>}
    </span>
  );
}

/**
 * A key's spend this day and month, each against the key's budget when it has one with its
 * forecast, what its calls under way hold, and whether its budgets are soft.
 */
export function KeySpend({ id, spend, limits }: { id: string; spend: Spend | undefined; limits: ApiKey['limits'] }) {
  const { day, month } = spend ?? { day: 0, month: 0 };
  const perDay = limits?.cost_per_day ?? null;
  const perMonth = limits?.cost_per_month ?? null;
  const reserved = useKeyReserved(id, perDay !== null || perMonth !== null);
  return (
    <span class="spend">
      <SpendLine period="today" spent={day} budget={perDay} />
      <Forecast spent={day} budget={perDay} per="day" />
      <SpendLine period="month" spent={month} budget={perMonth} />
      <Forecast spent={month} budget={perMonth} per="month" />
      {reserved !== null && <Reserved reserved={reserved} budget={perDay ?? perMonth} />}
      {limits?.cost_soft === true && <span class="muted">soft: alerts only</span>}
    </span>
  );
}

/** One spend against its budget: a native <meter> when there is a budget. */
function BudgetGauge({ label, spent, budget, per }: { label: string; spent: number; budget: number | null; per: Period }) {
  const id = `budget-${label.toLowerCase().replace(/\W+/g, '-')}`;
  if (budget === null) {
    return (
      <div class="gauge">
        <span class="gauge-label">{label}</span>
        <span class="gauge-figures">
          {formatUsd(spent)} <span class="muted">(no budget)</span>
        </span>
      </div>
    );
  }
  const state = budgetState(spent, budget);
  return (
    <div class={`gauge ${state ?? ''}`}>
      <label for={id} class="gauge-label">
        {label}
      </label>
      <meter id={id} min={0} max={budget} low={budget * 0.8} high={budget * 0.999} optimum={0} value={Math.min(spent, budget)}>
        {formatShare(spent, budget)}
      </meter>
      <span class="gauge-figures">
        {against(spent, budget)}
        {state && <strong class="budget-state"> {STATE_WORDS[state]}</strong>}
      </span>
      <Forecast spent={spent} budget={budget} per={per} />
    </div>
  );
}

/** The account's last budget alerts, from the audit log: when, which period and threshold, delivered or not. */
function BudgetAlerts({ account }: { account: string }) {
  const [alerts, setAlerts] = useState<AuditEntry[] | null>(null);
  useEffect(() => {
    setAlerts(null);
    api.audit({ action: 'budget.alert_sent', key: '', account }, null).then(
      (page) => setAlerts(page.data.slice(0, 10)),
      () => setAlerts([]),
    );
  }, [account]);
  if (alerts === null || alerts.length === 0) return null;
  return (
    <div>
      <h3>Recent alerts</h3>
      <ul>
        {alerts.map((entry) => (
          <li key={entry.id}>
            {new Date(entry.at * 1000).toISOString().slice(0, 16).replace('T', ' ')} UTC: {entry.fields.join(', ')}
          </li>
        ))}
      </ul>
    </div>
  );
}

const fieldValue = (usd: number | null) => (usd === null ? '' : String(usd));

/** An account's budgets in money, over all its keys: its spend against them, and a form to set or remove them. */
export function AccountBudgets({ account }: { account: string }) {
  const [limits, setLimits] = useState<AccountLimits | null>(null);
  const [form, setForm] = useState({ day: '', month: '', soft: false, thresholds: '' });
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const show = (loaded: AccountLimits) => {
    setLimits(loaded);
    setForm({
      day: fieldValue(loaded.costPerDay),
      month: fieldValue(loaded.costPerMonth),
      soft: loaded.costSoft,
      thresholds: (loaded.costAlertThresholds ?? []).join(', '),
    });
  };
  useEffect(() => {
    setLimits(null);
    setError(null);
    api.accountLimits(account).then(show, (err: unknown) => setError(err instanceof ApiError ? err.message : 'The budgets could not be loaded.'));
  }, [account]);

  const save = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      show(
        await api.setAccountLimits(account, {
          costPerDay: form.day === '' ? null : Number(form.day),
          costPerMonth: form.month === '' ? null : Number(form.month),
          costSoft: form.soft,
          costAlertThresholds: form.thresholds.trim() === '' ? null : percentList(form.thresholds),
        }),
      );
    } catch (err) {
      setError(err instanceof ApiError ? err.message : 'The budgets could not be saved.');
    } finally {
      setBusy(false);
    }
  };

  return (
    <section class="card" aria-labelledby="budgets-title">
      <h2 id="budgets-title">Budgets</h2>
      {limits === null && error === null && <Loading what="the budgets" />}
      {limits !== null && (
        <div class="gauges">
          <BudgetGauge label="Spent today (UTC)" spent={limits.spent.day} budget={limits.costPerDay} per="day" />
          <BudgetGauge label="Spent this month (UTC)" spent={limits.spent.month} budget={limits.costPerMonth} per="month" />
          <p class="hint">
            {formatUsd(limits.reserved)} reserved by calls under way (their maximum cost, until they end)
            {limits.reserved > 0 &&
              (limits.costPerDay ?? limits.costPerMonth) !== null &&
              `: ${formatShare(limits.reserved, (limits.costPerDay ?? limits.costPerMonth) as number)} of the budget`}
            .
          </p>
          <p class="hint">
            {limits.costSoft ? 'Soft budgets: they alert, and refuse no call.' : 'Calls that no longer fit are refused.'} Alerts at{' '}
            {limits.costAlertThresholds === null ? "the gateway's thresholds" : limits.costAlertThresholds.map((percent) => `${percent}%`).join(', ')}.
          </p>
        </div>
      )}
      <BudgetAlerts account={account} />
      {/* Shown once the budgets are loaded: their arrival would overwrite what was typed. */}
      {may('change') && limits !== null && (
        <form onSubmit={save}>
          <p class="hint">
            An account's budgets cover all its keys: once what is left of one in the UTC day or month cannot hold a call's maximum cost, its model calls are
            refused until the period ends. Empty: no budget.
          </p>
          <div class="grid">
            <div>
              <label for="budget-day">Budget per UTC day (USD)</label>
              <input
                id="budget-day"
                type="number"
                min={0}
                step="any"
                inputMode="decimal"
                value={form.day}
                onInput={(event) => setForm({ ...form, day: event.currentTarget.value })}
              />
            </div>
            <div>
              <label for="budget-month">Budget per UTC month (USD)</label>
              <input
                id="budget-month"
                type="number"
                min={0}
                step="any"
                inputMode="decimal"
                value={form.month}
                onInput={(event) => setForm({ ...form, month: event.currentTarget.value })}
              />
            </div>
          </div>
          <div class="grid">
            <div>
              <label for="budget-alerts">Alert at (% of each budget; empty: the gateway's thresholds)</label>
              <input
                id="budget-alerts"
                inputMode="numeric"
                placeholder="50, 80, 100"
                value={form.thresholds}
                onInput={(event) => setForm({ ...form, thresholds: event.currentTarget.value })}
              />
            </div>
            <label class="check">
              <input type="checkbox" checked={form.soft} onChange={(event) => setForm({ ...form, soft: event.currentTarget.checked })} />
              Soft budgets: alert only, never refuse a call
            </label>
          </div>
          <ErrorAlert message={error} />
          <button type="submit" disabled={busy}>
            {busy ? 'Saving…' : 'Save budgets'}
          </button>
        </form>
      )}
    </section>
  );
}
