import type { KeyObject as ApiKey, NewKeyObject as NewKey } from '../../lib/admin/key-object.ts';

// The admin API as the page uses it: same origin, the session cookie (HttpOnly, so never read
// here) and the session's CSRF token on every request that changes something.

/** What a session may do: a viewer reads, an operator also changes keys and budgets, an admin everything. */
export type Role = 'admin' | 'operator' | 'viewer';

export interface Session {
  /** The admin token the session was opened with; `null` for a person's, signed in through the OIDC provider. */
  admin_token_id: string | null;
  /** What the token's creator called it; `null` when unnamed. */
  admin_token_name: string | null;
  user: { id: string; email: string | null; name: string | null } | null;
  role: Role;
  csrf_token: string;
  expires_at: number;
}

/** `GET /oidc`: the identity provider the login page offers; the request fails when there is none. */
export interface OidcProvider {
  name: string;
  login_url: string;
  /** Where the browser signs out at the provider too, once the session here is ended. */
  logout_url: string;
  token_sign_in: boolean;
}

/** A person who signed in through the identity provider. */
export interface User {
  id: string;
  email: string | null;
  name: string | null;
  role: Role | null;
  assigned_role: Role | null;
  claim_role: Role | null;
  disabled: boolean;
  created_at: number;
  last_sign_in_at: number;
}

// A key as the admin API shows it, and as created or rotated (with the secret `key`, shown this once).
export type { ApiKey, NewKey };

export interface Catalog {
  scopes: string[];
  models: string[];
  /** `kmg` of `kmg_sk_…`. */
  key_prefix: string;
}

export interface Account {
  account: string;
  files: number;
  bytes: number;
  creations_today: number | null;
  bytes_today: number | null;
  limits: {
    max_files: number;
    max_stored_bytes: number;
    max_file_bytes: number;
    creates_per_minute: number;
    creates_per_day: number;
    bytes_per_day: number;
  };
}

/** One line of `GET /accounts`: an account with a key; the month's figures `null` when the server keeps no usage. */
export interface AccountSummary {
  account: string;
  /** Its active keys. */
  keys: number;
  files: number;
  bytes: number;
  requests_this_month: number | null;
  input_tokens_this_month: number | null;
  output_tokens_this_month: number | null;
  /** USD. */
  cost_usd_this_month: number | null;
}

export interface UsageFigures {
  requests: number;
  /** The requests answered (2xx). */
  answered: number;
  /** The requests refused or failed (4xx, 5xx). */
  refused: number;
  input_tokens: number;
  output_tokens: number;
  /** What the calls cost, in USD. */
  cost_usd: number;
  /** The requests answered from the response cache, and what their answers cost when they were made (USD). */
  cache_hits: number;
  cost_saved_usd: number;
}

/** `GET /accounts/{account}/limits`: an account's budgets and its spend so far, in USD. */
export interface AccountLimits {
  account: string;
  costPerDay: number | null;
  costPerMonth: number | null;
  /** Soft budgets alert, and never refuse a call. */
  costSoft: boolean;
  /** The percents of each budget that alert; `null`: the gateway's. */
  costAlertThresholds: number[] | null;
  spent: { day: number; month: number };
  /** What the account's calls under way hold against its budgets, in USD. */
  reserved: number;
}

/** `GET /keys/{id}/spend`: a key's spend so far and what its calls under way hold, in USD. */
export interface KeySpend {
  spent: { day: number; month: number };
  reserved: number;
}

/** `GET /usage?by=key&series=day`: each key's figures, split by day. */
export interface KeyUsage {
  data: Array<UsageFigures & { key: string; series: UsageGroup[] }>;
}

/** `GET /mcp/usage?by=tool`: each tool's calls. */
export interface McpUsage {
  data: Array<{ group: string; calls: number; failed: number; duration_ms: number; request_bytes: number; response_bytes: number }>;
}

/** What the usage page splits each day by. */
export type UsageSplit = 'model' | 'key';

/** One group's figures, named by its grouping: a day's, a model's (`null`: calls without one) or a key's. */
export interface UsageGroup extends UsageFigures {
  day?: string;
  model?: string | null;
  key?: string;
}

/** `GET /usage?by=day&series=…`: each day with calls, split by model or key. */
export interface DailyUsage {
  since: number | null;
  totals: UsageFigures;
  data: Array<UsageFigures & { day: string; series: UsageGroup[] }>;
}

/** One admin action of the audit log: names and ids only, never a secret. */
export interface AuditEntry {
  id: string;
  at: number;
  action: string;
  actor: { type: 'admin_token' | 'user' | 'cli' | 'gateway'; id: string | null; name: string | null };
  key_id: string | null;
  account: string | null;
  admin_token_id: string | null;
  replacement_key_id: string | null;
  user_id: string | null;
  fields: string[];
  /** Each changed field's value before and after, when the action states them. */
  changes: Record<string, { from: unknown; to: unknown }> | null;
  address: string | null;
}

/** One model call of the request log, as its usage record keeps it. */
export interface RequestEntry {
  request_id: string;
  time: number;
  account: string;
  key_id: string;
  endpoint: string;
  model: string | null;
  deployment: string | null;
  status: number;
  attempts: number;
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
  latency_ms: number;
  trace_id: string | null;
  cache: 'hit' | 'miss' | null;
  cost_saved_usd: number;
}

/** What the requests page narrows the log to; an empty value is no filter. */
export interface RequestFilters {
  account: string;
  key: string;
  model: string;
  status: string;
}

/** What the audit page narrows the log to; an empty value is no filter. */
export interface AuditFilters {
  action: string;
  key: string;
  account: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

let csrfToken = '';
let role: Role = 'viewer';
let onSignedOut: () => void = () => {};

/** The session the page works in: its CSRF token goes with every change, its role says what the page offers. */
export function useSession(session: Session | null): void {
  csrfToken = session?.csrf_token ?? '';
  role = session?.role ?? 'viewer';
}

/**
 * Whether the session may change keys and budgets (`operator`, `admin`), or people (`admin`): the
 * page offers only what the admin API would accept.
 */
export const may = (what: 'change' | 'people') => (what === 'people' ? role === 'admin' : role !== 'viewer');

/** Called when any answer says the session is over (401). */
export function whenSignedOut(listener: () => void): void {
  onSignedOut = listener;
}

async function request<T>(method: string, path: string, options: { body?: unknown; token?: string } = {}): Promise<T> {
  const headers: Record<string, string> = {};
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  else if (method !== 'GET') headers['x-csrf-token'] = csrfToken;
  let response: Response;
  try {
    response = await fetch(`/admin/v1${path}`, {
      method,
      headers,
      credentials: 'same-origin',
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    });
  } catch {
    throw new ApiError(0, 'network_error', 'The server did not answer. Check that it is running, then try again.');
  }
  if (response.status === 204) return undefined as T;
  const data = (await response.json().catch(() => null)) as { error?: { code?: string; message?: string } } | null;
  if (!response.ok) {
    // Only a session the page had can end: the first look for one, or a log-in, is no news.
    if (response.status === 401 && csrfToken !== '' && options.token === undefined) onSignedOut();
    throw new ApiError(response.status, data?.error?.code ?? 'error', data?.error?.message ?? `The server answered ${response.status}`);
  }
  return data as T;
}

export const api = {
  /** Opens a session with the admin token: the token is sent this once and kept nowhere. */
  logIn: (token: string) => request<Session>('POST', '/sessions', { token }),
  currentSession: () => request<Session>('GET', '/sessions/current'),
  logOut: () => request<void>('DELETE', '/sessions/current'),
  /** The identity provider to sign in with; `null` when the server has none. */
  oidc: () => request<OidcProvider>('GET', '/oidc').catch(() => null),
  users: () => request<{ data: User[] }>('GET', '/users').then((list) => list.data),
  updateUser: (id: string, body: { role?: Role | null; disabled?: boolean }) => request<User>('PATCH', `/users/${encodeURIComponent(id)}`, { body }),
  catalog: () => request<Catalog>('GET', '/catalog'),
  /** Every key, or those whose account, id or name starts with `search`. */
  keys: (search: string) => request<{ data: ApiKey[] }>('GET', `/keys${search === '' ? '' : `?q=${encodeURIComponent(search)}`}`).then((list) => list.data),
  /** The keys of one account. */
  accountKeys: (account: string) => request<{ data: ApiKey[] }>('GET', `/keys?account=${encodeURIComponent(account)}`).then((list) => list.data),
  createKey: (body: Record<string, unknown>) => request<NewKey>('POST', '/keys', { body }),
  /** Changes a key's name, scopes, models, expiry and limits (`null` clears one). */
  updateKey: (id: string, body: Record<string, unknown>) => request<ApiKey>('PATCH', `/keys/${encodeURIComponent(id)}`, { body }),
  revokeKey: (id: string) => request<ApiKey>('POST', `/keys/${encodeURIComponent(id)}/revoke`),
  rotateKey: (id: string, graceSeconds: number) => request<NewKey>('POST', `/keys/${encodeURIComponent(id)}/rotate`, { body: { grace_seconds: graceSeconds } }),
  /** Every account that has a key, by name. */
  accounts: () => request<{ data: AccountSummary[] }>('GET', '/accounts').then((list) => list.data),
  account: (account: string) => request<Account>('GET', `/accounts/${encodeURIComponent(account)}`),
  accountLimits: (account: string) => request<AccountLimits>('GET', `/accounts/${encodeURIComponent(account)}/limits`),
  setAccountLimits: (
    account: string,
    body: { costPerDay: number | null; costPerMonth: number | null; costSoft: boolean; costAlertThresholds: Array<number | string> | null },
  ) => request<AccountLimits>('PUT', `/accounts/${encodeURIComponent(account)}/limits`, { body }),
  keySpend: (id: string) => request<KeySpend>('GET', `/keys/${encodeURIComponent(id)}/spend`),
  /** Each key's figures since `since` (a UTC date), split by UTC day, every account's: its spend this month and today. */
  keyUsage: (since: string) => request<KeyUsage>('GET', `/usage?${new URLSearchParams({ by: 'key', series: 'day', since })}`),
  /** Each UTC day's requests and tokens since `since` (a UTC date), split by model or key; every account when `account` is empty. */
  dailyUsage: (account: string, since: string, split: UsageSplit) => {
    const query = new URLSearchParams({ by: 'day', series: split, since });
    if (account !== '') query.set('account', account);
    return request<DailyUsage>('GET', `/usage?${query}`);
  },
  /** The MCP tool calls since `since` (a UTC date), by `server/tool`; every account when `account` is empty. */
  mcpUsage: (account: string, since: string) => {
    const query = new URLSearchParams({ by: 'tool', since });
    if (account !== '') query.set('account', account);
    return request<McpUsage>('GET', `/mcp/usage?${query}`);
  },
  /** A page of the audit log, newest first; `cursor` (a page's `next_cursor`) gives the older page after it. */
  audit: (filters: AuditFilters, cursor: string | null) => {
    const query = new URLSearchParams({ limit: '50' });
    for (const [name, value] of Object.entries(filters)) if (value !== '') query.set(name, value);
    if (cursor !== null) query.set('cursor', cursor);
    return request<{ data: AuditEntry[]; next_cursor: string | null }>('GET', `/audit?${query}`);
  },
  /** A page of the request log, newest first; `cursor` (a page's `next_cursor`) gives the older page after it. */
  requests: (filters: RequestFilters, cursor: string | null) => {
    const query = new URLSearchParams({ limit: '50' });
    for (const [name, value] of Object.entries(filters)) if (value !== '') query.set(name, value);
    if (cursor !== null) query.set('cursor', cursor);
    return request<{ data: RequestEntry[]; next_cursor: string | null }>('GET', `/requests?${query}`);
  },
};
