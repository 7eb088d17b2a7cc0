import { createHash } from 'node:crypto';
import type { ChainableCommander, Redis } from 'ioredis';
import { StoreUnavailableError } from '../../errors/gateway-error.js';

/** How long a call to Redis may take by default, in ms: the limiters' and the key changes' `timeoutMs`. */
export const DEFAULT_REDIS_TIMEOUT_MS = 500;

/** What every limiter on Redis is configured with. */
export interface RedisLimiterOptions {
  /**
   * An ioredis client created with `enableOfflineQueue: false`, as `createRedisClient()` makes
   * one: with the offline queue on, a call made while Redis is away waits for it to return
   * instead of failing.
   */
  client: Redis;
  /** Prefix of every key the limiter writes. Each limiter has its own default. */
  keyPrefix?: string;
  /**
   * When Redis cannot be reached (or does not answer within `timeoutMs`):
   * - `'none'` (default): fail closed. The limiter throws `StoreUnavailableError` (a 503
   *   `service_unavailable`): nothing passes that the shared limits have not counted.
   * - `'memory'`: fail open per process. Calls fall back to an in-memory limiter with the same
   *   limits (rate-limiter-flexible's insurance strategy): each process then allows the full
   *   limits on its own, and what it counts is not copied to Redis when Redis returns.
   */
  insurance?: 'none' | 'memory';
  /** How long Redis may take to answer a call, from when it is sent, before it counts as unreachable, in ms. Default 500. */
  timeoutMs?: number;
}

export type ResolvedRedisLimiterOptions = Required<RedisLimiterOptions>;

/** Checks the Redis options of a limiter once, at start-up, and fills in the defaults. */
export function resolveRedisLimiterOptions(
  options: { [K in keyof RedisLimiterOptions]: RedisLimiterOptions[K] | undefined },
  defaultPrefix: string,
): ResolvedRedisLimiterOptions {
  const { client, keyPrefix = defaultPrefix, insurance = 'none', timeoutMs = DEFAULT_REDIS_TIMEOUT_MS } = options;
  if (typeof client?.eval !== 'function') throw new TypeError('koa-model-gateway: client must be an ioredis client');
  if (client.options.enableOfflineQueue !== false) {
    throw new TypeError('koa-model-gateway: the Redis client needs enableOfflineQueue: false (use createRedisClient())');
  }
  if (typeof keyPrefix !== 'string' || keyPrefix === '') throw new TypeError('koa-model-gateway: keyPrefix must be a non-empty string');
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('koa-model-gateway: timeoutMs must be a positive number');
  if (insurance !== 'none' && insurance !== 'memory') throw new TypeError("koa-model-gateway: insurance must be 'none' or 'memory'");
  return { client, keyPrefix, insurance, timeoutMs };
}

/**
 * The keys' common part for one limited party (an account, a key id). The braces are a Redis
 * Cluster hash tag: every key of one party lives on one node, as a script needs. Encoding keeps
 * any id from reaching into another's keys.
 */
export function partyKey(keyPrefix: string, party: string): string {
  return `${keyPrefix}:{${encodeURIComponent(party)}}`;
}

/**
 * Redis's answer, or `StoreUnavailableError` when it fails or takes longer than `timeoutMs`. The
 * clock starts once the turn of the event loop that made the call is over, when a batched call
 * (`RedisScript.batched`) has been sent: a turn that stalls (a starved CPU) spends none of it.
 */
export function answerWithin<T>(call: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    setImmediate(() => {
      if (settled) return;
      timer = setTimeout(() => {
        // After a stall, timers run before the sockets are read: an answer that came meanwhile is
        // read in this same turn of the loop, before setImmediate's callbacks.
        setImmediate(() => reject(new StoreUnavailableError(`Redis did not answer within ${timeoutMs} ms`, { store: 'redis' })));
      }, timeoutMs);
    });
    call.then(
      (answer) => {
        settled = true;
        clearTimeout(timer);
        resolve(answer);
      },
      (err: unknown) => {
        settled = true;
        clearTimeout(timer);
        reject(err instanceof StoreUnavailableError ? err : new StoreUnavailableError('Redis is unavailable', { cause: err, store: 'redis' }));
      },
    );
  });
}

/**
 * A Lua script run by its SHA-1 (EVALSHA), so that its text crosses to Redis only when Redis does
 * not know it yet (a new or restarted Redis, a SCRIPT FLUSH): then once by EVAL, which loads it.
 * @example const consume = new RedisScript(CONSUME); await consume.run(client, 1, key, limit)
 */
export class RedisScript {
  readonly #lua: string;
  readonly #sha: string;

  constructor(lua: string) {
    this.#lua = lua;
    this.#sha = createHash('sha1').update(lua).digest('hex');
  }

  async run(client: Redis, keys: number, ...args: Array<string | number>): Promise<unknown> {
    try {
      return await client.evalsha(this.#sha, keys, ...args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return client.eval(this.#lua, keys, ...args);
    }
  }

  /**
   * A `run` whose calls made in one turn of the event loop go to Redis together, with the other
   * batched calls on `client` (`batchedCall`), in one write once the turn's I/O callbacks are
   * done: under load, one system call for many requests, and for one request one round trip for
   * what it asks at once; a call alone waits for no other.
   */
  batched(client: Redis, keys: number): (...args: Array<string | number>) => Promise<unknown> {
    return (...args) =>
      batchedCall(client, {
        send: (pipeline) => pipeline.evalsha(this.#sha, keys, ...args),
        alone: () => this.run(client, keys, ...args),
      });
  }
}

/** A call to Redis that can go in a pipeline (`send`) or alone (`alone`, which also loads a script Redis does not know). */
interface BatchedCall {
  send(pipeline: ChainableCommander): void;
  alone(): Promise<unknown>;
}

const waitingCalls = new WeakMap<Redis, Array<BatchedCall & { resolve(answer: unknown): void; reject(err: unknown): void }>>();

/**
 * Sends `call` with every other batched call made on `client` in this turn of the event loop: one
 * write, once the turn's I/O callbacks are done (`setImmediate`). A pipeline keeps their order and
 * is not atomic: each call is what it would be alone. A script Redis did not know runs again alone.
 * @example const [until] = (await batchedCall(client, { send: (p) => p.mget(key), alone: () => client.mget(key) })) as [string | null]
 */
export function batchedCall(client: Redis, call: BatchedCall): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let waiting = waitingCalls.get(client);
    if (waiting === undefined) {
      waiting = [];
      waitingCalls.set(client, waiting);
      setImmediate(() => sendWaiting(client));
    }
    waiting.push({ ...call, resolve, reject });
  });
}

function sendWaiting(client: Redis): void {
  const calls = waitingCalls.get(client) ?? [];
  waitingCalls.delete(client);
  if (calls.length === 1) {
    const [call] = calls as [(typeof calls)[number]];
    call.alone().then(call.resolve, call.reject);
    return;
  }
  const pipeline = client.pipeline();
  for (const call of calls) call.send(pipeline);
  pipeline.exec().then(
    (results) =>
      calls.forEach((call, index) => {
        const [err, answer] = results?.[index] ?? [new Error('no answer in the pipeline'), undefined];
        if (err === null) call.resolve(answer);
        else if (isNoScript(err)) call.alone().then(call.resolve, call.reject);
        else call.reject(err);
      }),
    (err: unknown) => {
      for (const call of calls) call.reject(err);
    },
  );
}

const isNoScript = (err: unknown) => err instanceof Error && err.message.startsWith('NOSCRIPT');
