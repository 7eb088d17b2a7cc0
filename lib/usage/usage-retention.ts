import { setImmediate as nextTurn } from 'node:timers/promises';
import { DAY_MS } from './usage-rollups.js';
import type { UsageStore } from './usage-store.js';

export interface UsageRetention {
  /** Days the raw records are kept (`GET /admin/v1/requests`, exports); 0: forever. Default 30. */
  recordsDays?: number;
  /** Days the hourly and daily roll-ups are kept (every report); 0: forever. Default 400. */
  rollupsDays?: number;
  /** Rows one statement deletes from one table, at most. Default 1,000. */
  batch?: number;
  /** Statements one run makes per table, at most: a bound on a run; the next one goes on. Default 1,000. */
  maxBatches?: number;
  /** Default `Date.now`. */
  nowMs?: () => number;
}

const cutoff = (days: number, now: number) => (days === 0 ? 0 : now - days * DAY_MS);

/**
 * Deletes the usage records and roll-ups older than their retention, one bounded batch at a time
 * (`UsageStore.prune`), letting other work run between two; resolves to the rows deleted. Run it
 * off the request path, as the reference server's sweep does. A store without `prune` keeps
 * everything. Several processes may run it at once.
 * @example await pruneUsage(new KnexUsageStore(knex), { recordsDays: 30, rollupsDays: 400 })
 */
export async function pruneUsage(store: Pick<UsageStore, 'prune'>, retention: UsageRetention = {}): Promise<number> {
  const { recordsDays = 30, rollupsDays = 400, batch = 1000, maxBatches = 1000, nowMs = Date.now } = retention;
  for (const [name, value, least] of [
    ['recordsDays', recordsDays, 0],
    ['rollupsDays', rollupsDays, 0],
    ['batch', batch, 1],
    ['maxBatches', maxBatches, 1],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < least) throw new TypeError(`koa-model-gateway: pruneUsage() ${name} must be a whole number, ${least} or more`);
  }
  if (store.prune === undefined) return 0;
  const now = nowMs();
  const pruning = { recordsBefore: cutoff(recordsDays, now), rollupsBefore: cutoff(rollupsDays, now), limit: batch, now };
  let deleted = 0;
  for (let run = 0; run < maxBatches; run += 1) {
    const count = await store.prune(pruning);
    deleted += count;
    if (count === 0) break;
    await nextTurn();
  }
  return deleted;
}
