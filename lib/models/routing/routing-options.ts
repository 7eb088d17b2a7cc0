import { setTimeout as delay } from 'node:timers/promises';
import { z } from 'zod';
import { parseOptions, positiveInteger, settingsObject, timerMs } from '../../settings/schemas.js';
import { MemoryCooldownStore } from '../../stores/memory/cooldown-store.js';
import type { CooldownPolicy, CooldownStore } from './cooldown-store.js';

/** The statuses retried by default: timeouts, rate limits and the upstream's own failures (decisions.md). */
export const DEFAULT_RETRY_STATUSES: readonly number[] = [408, 429, 500, 502, 503, 504, 529];

/**
 * How the model handlers walk a model's deployments and fallbacks (the `routing` option). Every
 * field is optional:
 * - `maxAttempts`: attempts per client call, the first included. Default 3.
 * - `budgetMs`: time for all of a call's attempts and the waits between them; an attempt's
 *   silence limit is the smaller of `timeoutMs` and what is left of it. Default: none.
 * - `retryStatuses`: upstream statuses retried. Default 408, 429, 500, 502, 503, 504, 529.
 * - `backoff`: `{ baseMs, maxMs }`: the wait before the n-th retry is `baseMs * 2^(n-1)`, at most
 *   `maxMs`, with full jitter (a random part of it). Defaults 100 and 2,000.
 * - `retryAfterCapMs`: the longest wait an upstream's `retry-after` / `retry-after-ms` may ask for
 *   before a retry on the same deployment. Default 10,000.
 * - `cooldown`: `{ failures, windowSeconds, seconds, maxSeconds, store }`: a deployment failing
 *   `failures` times within `windowSeconds` is skipped for `seconds` (or a 429's `retry-after`,
 *   when longer, up to `maxSeconds`). Defaults 3, 10, 30 and 300; `store`: a `MemoryCooldownStore` of the handler's own (`modelsRouter()`
 *   makes one for all its endpoints); a `RedisCooldownStore` shares what one instance learns.
 * - `random`: a source of numbers in [0, 1) for the weights and the jitter. Default `Math.random`.
 * - `sleep`: how the handler waits between attempts. Default: a timer.
 * @example modelsRouter({ catalog, providers, routing: { maxAttempts: 4, budgetMs: 60_000, cooldown: { store: new RedisCooldownStore({ client }) } } })
 */
export interface RoutingOptions {
  maxAttempts?: number | undefined;
  budgetMs?: number | undefined;
  retryStatuses?: readonly number[] | undefined;
  backoff?: { baseMs?: number | undefined; maxMs?: number | undefined } | undefined;
  retryAfterCapMs?: number | undefined;
  cooldown?:
    | {
        failures?: number | undefined;
        windowSeconds?: number | undefined;
        seconds?: number | undefined;
        maxSeconds?: number | undefined;
        store?: CooldownStore | undefined;
      }
    | undefined;
  random?: (() => number) | undefined;
  sleep?: ((ms: number) => Promise<void>) | undefined;
}

const isCooldownStore = (value: unknown): value is CooldownStore =>
  typeof (value as Partial<CooldownStore> | undefined)?.fail === 'function' && typeof (value as Partial<CooldownStore>).coolingUntil === 'function';

const fn = <T>(what: string) => z.custom<T>((value) => typeof value === 'function', { error: `must be ${what}` });

const cooldownSettings = {
  failures: positiveInteger.optional(),
  windowSeconds: positiveInteger.optional(),
  seconds: positiveInteger.optional(),
  maxSeconds: positiveInteger.optional(),
};

const HTTP_ERROR_STATUS = 'must be an HTTP error status (400 to 599)';
const httpErrorStatus = z.int({ error: HTTP_ERROR_STATUS }).min(400, { error: HTTP_ERROR_STATUS }).max(599, { error: HTTP_ERROR_STATUS });

const dataSettings = {
  maxAttempts: positiveInteger.optional(),
  budgetMs: timerMs.optional(),
  retryStatuses: z.array(httpErrorStatus, { error: 'must be an array of HTTP error statuses' }).optional(),
  backoff: settingsObject({ baseMs: timerMs.optional(), maxMs: timerMs.optional() }).optional(),
  retryAfterCapMs: timerMs.optional(),
};

/**
 * The routing settings a config file can hold: `RoutingOptions` without the functions and the
 * store (`{ maxAttempts, budgetMs, retryStatuses, backoff: { baseMs, maxMs }, retryAfterCapMs,
 * cooldown: { failures, windowSeconds, seconds, maxSeconds } }`, every field optional), for a schema of one.
 * @example settingsObject({ routing: routingSettingsSchema.optional() })
 */
export const routingSettingsSchema = settingsObject({ ...dataSettings, cooldown: settingsObject(cooldownSettings).optional() });

const routingSchema = settingsObject({
  ...dataSettings,
  cooldown: settingsObject({
    ...cooldownSettings,
    store: z.custom<CooldownStore>(isCooldownStore, { error: 'must be a CooldownStore (MemoryCooldownStore, RedisCooldownStore)' }).optional(),
  }).optional(),
  random: fn<() => number>('a function').optional(),
  sleep: fn<(ms: number) => Promise<void>>('a function').optional(),
});

/** The routing of a handler, checked once, with its defaults. */
export interface Routing {
  maxAttempts: number;
  budgetMs: number | undefined;
  retryStatuses: ReadonlySet<number>;
  backoff: { baseMs: number; maxMs: number };
  retryAfterCapMs: number;
  policy: CooldownPolicy;
  store: CooldownStore;
  random: () => number;
  sleep: (ms: number) => Promise<void>;
}

/** The `routing` option of a model handler, checked, with its defaults filled in. */
export function routingOptions(options: RoutingOptions | undefined, where: string): Routing {
  const parsed = parseOptions(z.object({ routing: routingSchema.optional() }), { routing: options }, where).routing ?? {};
  const { cooldown = {}, backoff = {} } = parsed;
  return {
    maxAttempts: parsed.maxAttempts ?? 3,
    budgetMs: parsed.budgetMs,
    retryStatuses: new Set(parsed.retryStatuses ?? DEFAULT_RETRY_STATUSES),
    backoff: { baseMs: backoff.baseMs ?? 100, maxMs: backoff.maxMs ?? 2_000 },
    retryAfterCapMs: parsed.retryAfterCapMs ?? 10_000,
    policy: {
      failures: cooldown.failures ?? 3,
      windowMs: (cooldown.windowSeconds ?? 10) * 1000,
      cooldownMs: (cooldown.seconds ?? 30) * 1000,
      maxCooldownMs: (cooldown.maxSeconds ?? 300) * 1000,
    },
    store: cooldown.store ?? new MemoryCooldownStore(),
    random: parsed.random ?? Math.random,
    sleep: parsed.sleep ?? ((ms: number) => delay(ms).then(() => undefined)),
  };
}

/**
 * The wait before retry number `retry` (1 for the first): exponential, with full jitter, at
 * least what the upstream asked for (`retryAfterMs`) up to the cap.
 */
export function backoffMs(routing: Routing, retry: number, retryAfterMs: number | undefined): number {
  const ceiling = Math.min(routing.backoff.maxMs, routing.backoff.baseMs * 2 ** (retry - 1));
  const jittered = Math.floor(routing.random() * ceiling);
  return Math.max(jittered, Math.min(retryAfterMs ?? 0, routing.retryAfterCapMs));
}

const SECONDS = /^\d+(\.\d+)?$/;

/** What an answer's `retry-after-ms` or `retry-after` (seconds, or an HTTP date) asks for, in ms. */
export function retryAfterMs(headers: { get(name: string): string }, nowMs: number): number | undefined {
  const ms = headers.get('retry-after-ms');
  if (SECONDS.test(ms)) return Number(ms);
  const after = headers.get('retry-after');
  if (SECONDS.test(after)) return Number(after) * 1000;
  const date = Date.parse(after);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/** `legs` in a weighted random order: each next one drawn among the rest by its weight. */
export function weightedOrder<T extends { weight: number }>(legs: readonly T[], random: () => number): T[] {
  const rest = [...legs];
  const order: T[] = [];
  while (rest.length > 1) {
    let point = random() * rest.reduce((sum, leg) => sum + leg.weight, 0);
    let index = 0;
    while (index < rest.length - 1 && point >= (rest[index] as T).weight) point -= (rest[index++] as T).weight;
    order.push(...rest.splice(index, 1));
  }
  return [...order, ...rest];
}
