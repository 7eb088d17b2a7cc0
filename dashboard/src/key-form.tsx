import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, type ApiKey, type Catalog, type NewKey } from './api.ts';
import { useKnownAccounts } from './account-picker.tsx';
import { Actions, ErrorAlert } from './ui.tsx';

const LIMITS = [
  ['requests_per_minute', 'Requests per minute'],
  ['tokens_per_minute', 'Tokens per minute'],
  ['tokens_per_day', 'Tokens per day'],
] as const;

/** Budgets in USD: decimals, unlike the limits. */
const BUDGETS = [
  ['cost_per_day', 'Budget per UTC day (USD)'],
  ['cost_per_month', 'Budget per UTC month (USD)'],
] as const;

type LimitName = (typeof LIMITS)[number][0] | (typeof BUDGETS)[number][0];

/**
 * Percents as the admin API takes them, from text such as `50, 80, 100`: a part that is not
 * digits goes as it is written, for the server to refuse by name.
 */
export const percentList = (text: string) =>
  text
    .split(/[\s,%]+/)
    .filter((part) => part !== '')
    .map((part) => (/^\d+$/.test(part) ? Number(part) : part));

/** The request body of the form's state: only what was set, as the admin API takes it. */
function keyRequest(form: {
  account: string;
  name: string;
  scopes: string[];
  everyModel: boolean;
  models: string[];
  limits: Record<LimitName, string>;
  /** `null`: the gateway's default, as the key had it. */
  costSoft: boolean | null;
  alertThresholds: string;
  expires: string;
  mcpTools: string;
}) {
  const mcpTools = form.mcpTools.split(/[\s,]+/).filter((glob) => glob !== '');
  const thresholds = percentList(form.alertThresholds);
  const limits = {
    ...Object.fromEntries([...LIMITS, ...BUDGETS].filter(([name]) => form.limits[name] !== '').map(([name]) => [name, Number(form.limits[name])])),
    ...(form.costSoft !== null && { cost_soft: form.costSoft }),
    ...(thresholds.length > 0 && { cost_alert_thresholds: thresholds }),
  };
  return {
    account: form.account,
    ...(form.name.trim() === '' ? {} : { name: form.name }),
    scopes: form.scopes,
    models: form.everyModel ? null : form.models,
    ...(Object.keys(limits).length > 0 ? { limits } : {}),
    ...(mcpTools.length > 0 ? { mcp_tools: mcpTools } : {}),
    // datetime-local is the viewer's local time; the API takes Unix seconds.
    ...(form.expires === '' ? {} : { expires_at: Math.floor(new Date(form.expires).getTime() / 1000) }),
  };
}

/**
 * The change of every mutable field, as `PATCH /keys/{id}` takes it: an empty name, expiry or set
 * of limits clears it (`null`).
 */
function keyChanges(form: Parameters<typeof keyRequest>[0]) {
  const { name = null, scopes, models, limits = null, expires_at = null } = keyRequest(form);
  return { name, scopes, models, limits, expires_at };
}

/** A time in Unix seconds as a datetime-local field shows it: the viewer's local time, to the minute. */
const localTime = (seconds: number | null) =>
  seconds === null ? '' : new Date(seconds * 1000 - new Date(seconds * 1000).getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

const toggled = (list: string[], value: string, on: boolean) => (on ? [...list, value] : list.filter((item) => item !== value));

/**
 * Create a key (account, name, scopes, models, limits and expiry), or with `editing` change every
 * field of one but its account; the server checks every field. It opens where it is seen: scrolled
 * to, its first field focused.
 */
export function KeyForm({
  catalog,
  account,
  editing,
  onCreated,
  onUpdated,
  onCancel,
}: {
  catalog: Catalog;
  account: string;
  editing?: ApiKey;
  onCreated: (created: NewKey) => void;
  onUpdated?: (updated: ApiKey) => void;
  onCancel: () => void;
}) {
  const limit = (name: LimitName) => String(editing?.limits?.[name] ?? '');
  const [form, setForm] = useState({
    account: editing?.account ?? account,
    name: editing?.name ?? '',
    scopes: editing?.scopes ?? catalog.scopes,
    everyModel: editing ? editing.models === null : true,
    models: editing?.models ?? ([] as string[]),
    limits: Object.fromEntries([...LIMITS, ...BUDGETS].map(([name]) => [name, limit(name)])) as Record<LimitName, string>,
    costSoft: editing?.limits?.cost_soft ?? null,
    alertThresholds: (editing?.limits?.cost_alert_thresholds ?? []).join(', '),
    expires: localTime(editing?.expires_at ?? null),
    mcpTools: (editing?.mcp_tools ?? []).join(', '),
  });
  const card = useRef<HTMLFormElement>(null);
  useEffect(() => {
    card.current?.scrollIntoView({ block: 'start' });
    card.current?.querySelector<HTMLInputElement>('input:not([readonly])')?.focus({ preventScroll: true });
  }, [editing?.id]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const known = useKnownAccounts();
  // The new account the viewer was asked about: a typo would otherwise start an account of its own.
  const [askedAbout, setAskedAbout] = useState<string | null>(null);
  const set = (changes: Partial<typeof form>) => setForm({ ...form, ...changes });
  // As the server names it: trimmed, in NFC.
  const accountName = form.account.trim().normalize('NFC');
  const confirming = askedAbout !== null && askedAbout === accountName;

  const submit = async (event: Event) => {
    event.preventDefault();
    if (editing) {
      setBusy(true);
      setError(null);
      try {
        onUpdated?.(await api.updateKey(editing.id, keyChanges(form)));
      } catch (err) {
        setError(err instanceof ApiError ? err.message : 'The key could not be saved.');
      } finally {
        setBusy(false);
      }
      return;
    }
    if (!known.includes(accountName) && !confirming) {
      setAskedAbout(accountName);
      return;
    }
    setBusy(true);
    setError(null);
    try {
      onCreated(await api.createKey(keyRequest(form)));
    } catch (err) {
      setError(err instanceof ApiError ? err.message : 'The key could not be created.');
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card key-form" ref={card} onSubmit={submit} aria-labelledby="new-key-title">
      <h2 id="new-key-title">
        {editing ? (
          <>
            Edit key <code>{editing.id}</code>
          </>
        ) : (
          'New key'
        )}
      </h2>
      <div class="grid">
        <div>
          <label for="new-account">Account</label>
          <input
            id="new-account"
            required
            readOnly={editing !== undefined}
            list="new-account-known"
            value={form.account}
            onInput={(event) => set({ account: event.currentTarget.value })}
          />
          <datalist id="new-account-known">
            {known.map((name) => (
              <option key={name} value={name} />
            ))}
          </datalist>
        </div>
        <div>
          <label for="new-name">Name (optional: what the key is for)</label>
          <input id="new-name" value={form.name} onInput={(event) => set({ name: event.currentTarget.value })} />
        </div>
        <div>
          <label for="new-expires">Expires (your local time; empty: never)</label>
          <input id="new-expires" type="datetime-local" value={form.expires} onInput={(event) => set({ expires: event.currentTarget.value })} />
        </div>
      </div>
      <fieldset>
        <legend>Scopes</legend>
        {catalog.scopes.map((scope) => (
          <label class="check" key={scope}>
            <input
              type="checkbox"
              checked={form.scopes.includes(scope)}
              onChange={(event) => set({ scopes: toggled(form.scopes, scope, event.currentTarget.checked) })}
            />
            <code>{scope}</code>
          </label>
        ))}
      </fieldset>
      <fieldset>
        <legend>Models</legend>
        <label class="check">
          <input type="radio" name="models" checked={form.everyModel} onChange={() => set({ everyModel: true })} />
          Every model
        </label>
        <label class="check">
          <input type="radio" name="models" checked={!form.everyModel} onChange={() => set({ everyModel: false })} />
          Only these:
        </label>
        {catalog.models.map((model) => (
          <label class="check" key={model}>
            <input
              type="checkbox"
              disabled={form.everyModel}
              checked={!form.everyModel && form.models.includes(model)}
              onChange={(event) => set({ models: toggled(form.models, model, event.currentTarget.checked) })}
            />
            <code>{model}</code>
          </label>
        ))}
      </fieldset>
      <fieldset>
        <legend>Limits on model calls (empty: the gateway's defaults)</legend>
        <div class="grid three">
          {LIMITS.map(([name, label]) => (
            <div key={name}>
              <label for={`limit-${name}`}>{label}</label>
              <input
                id={`limit-${name}`}
                type="number"
                min={1}
                step={1}
                inputMode="numeric"
                value={form.limits[name]}
                onInput={(event) => set({ limits: { ...form.limits, [name]: event.currentTarget.value } })}
              />
            </div>
          ))}
        </div>
        <div class="grid">
          {BUDGETS.map(([name, label]) => (
            <div key={name}>
              <label for={`limit-${name}`}>{label}</label>
              <input
                id={`limit-${name}`}
                type="number"
                min={0}
                step="any"
                inputMode="decimal"
                value={form.limits[name]}
                onInput={(event) => set({ limits: { ...form.limits, [name]: event.currentTarget.value } })}
              />
            </div>
          ))}
        </div>
        <div class="grid">
          <div>
            <label for="limit-cost_alert_thresholds">Alert at (% of each budget; empty: the gateway's thresholds)</label>
            <input
              id="limit-cost_alert_thresholds"
              inputMode="numeric"
              placeholder="50, 80, 100"
              value={form.alertThresholds}
              onInput={(event) => set({ alertThresholds: event.currentTarget.value })}
            />
          </div>
          <label class="check">
            <input type="checkbox" checked={form.costSoft === true} onChange={(event) => set({ costSoft: event.currentTarget.checked })} />
            Soft budgets: alert only, never refuse a call
          </label>
        </div>
      </fieldset>
      <fieldset>
        <legend>MCP tools (empty: none; within what the owner's MCP grant allows)</legend>
        <label for="new-mcp-tools">
          Globs over <code>server/tool</code>, separated by commas or spaces: <code>github/*</code>, <code>search/web_search</code>
        </label>
        <input id="new-mcp-tools" value={form.mcpTools} onInput={(event) => set({ mcpTools: event.currentTarget.value })} />
      </fieldset>
      {confirming && (
        <p class="notice" role="alert">
          <strong class="account-name">{accountName}</strong> is a new account: create it? No key has this account yet.
        </p>
      )}
      <ErrorAlert message={error} />
      <Actions onCancel={onCancel}>
        <button type="submit" disabled={busy}>
          {editing ? (busy ? 'Saving…' : 'Save key') : busy ? 'Creating…' : confirming ? 'Create the account and its key' : 'Create key'}
        </button>
      </Actions>
    </form>
  );
}
