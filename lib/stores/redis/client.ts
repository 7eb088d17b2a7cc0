import { Redis, type RedisOptions } from 'ioredis';
import { StoreUnavailableError } from '../../errors/gateway-error.js';

/** ioredis options, except the three that `createRedisClient` decides. */
export interface RedisClientOptions
  extends Omit<RedisOptions, 'enableOfflineQueue' | 'maxRetriesPerRequest' | 'autoResendUnfulfilledCommands' | 'lazyConnect'> {
  /** How long to wait for the first `ready` before giving up, in ms. Default 5000. */
  readyTimeoutMs?: number;
}

/**
 * An ioredis client that fails fast while Redis is away, resolved once it is `ready`.
 *
 * ioredis' defaults suit a cache, not a limit: with the offline queue on, a command sent while
 * Redis is away waits for it to come back (ioredis retries each command 20 times, more than a
 * minute), and a command in flight when the connection drops is sent again after reconnecting,
 * so a script that already ran would run twice. Here:
 * - `enableOfflineQueue: false`: a command sent while not connected fails at once;
 * - `maxRetriesPerRequest: 0` and `autoResendUnfulfilledCommands: false`: commands in flight
 *   when the connection drops fail at once and are never sent again.
 * The client still reconnects by itself (ioredis' `retryStrategy`). Because nothing is queued,
 * commands before the first `ready` would fail: hence the wait, at start-up.
 *
 * ioredis prints "Unhandled error event" for connection errors unless the client has an
 * `error` listener: add one that logs.
 * @example
 * const redis = await createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
 * redis.on('error', (err) => logger.warn({ err }, 'redis'))
 */
export async function createRedisClient(url: string, options: RedisClientOptions = {}): Promise<Redis> {
  const { readyTimeoutMs = 5000, ...redisOptions } = options;
  const client = new Redis(url, {
    ...redisOptions,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    lazyConnect: false,
  });
  let lastError: unknown;
  const onError = (err: unknown) => {
    lastError = err;
  };
  client.on('error', onError);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(lastError), readyTimeoutMs);
      client.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return client;
  } catch (err) {
    client.disconnect();
    // The URL is left out: it may hold a password.
    throw new StoreUnavailableError(`Redis was not ready within ${readyTimeoutMs} ms`, { cause: err, store: 'redis' });
  } finally {
    client.off('error', onError);
  }
}
