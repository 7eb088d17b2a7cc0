import { usageDay, type UsageFilter, type UsageGrouping, type UsageRecord, type UsageRow, type UsageStore } from '../../usage/usage-store.js';

const matches = (record: UsageRecord, filter: UsageFilter) =>
  (filter.account === undefined || record.account === filter.account) &&
  (filter.keyId === undefined || record.keyId === filter.keyId) &&
  (filter.since === undefined || record.time >= filter.since);

const GROUP_OF: Record<UsageGrouping, (record: UsageRecord) => string | null> = {
  day: (record) => usageDay(record.time),
  model: (record) => record.model,
  key: (record) => record.keyId,
};

/**
 * UsageStore in process memory: for tests, examples and gateways that do not keep usage. It
 * keeps every record until the process ends.
 * @example usageRecorder({ store: new MemoryUsageStore() })
 */
export class MemoryUsageStore implements UsageStore {
  readonly #records: UsageRecord[] = [];

  async insert(records: readonly UsageRecord[]): Promise<void> {
    // Whole milliseconds, as the Knex store keeps them.
    this.#records.push(...records.map((record) => ({ ...record, time: Math.floor(record.time) })));
  }

  async list(filter: UsageFilter & { limit?: number } = {}): Promise<UsageRecord[]> {
    const { limit = 1000 } = filter;
    return this.#records
      .filter((record) => matches(record, filter))
      .reverse() // the sort is stable: ties stay newest first
      .sort((a, b) => b.time - a.time)
      .slice(0, limit)
      .map((record) => ({ ...record }));
  }

  async summarize(filter: UsageFilter, by: UsageGrouping, thenBy?: UsageGrouping): Promise<UsageRow[]> {
    const rows = new Map<string, UsageRow>();
    for (const record of this.#records) {
      if (!matches(record, filter)) continue;
      const group = GROUP_OF[by](record);
      const subgroup = thenBy === undefined ? undefined : GROUP_OF[thenBy](record);
      const id = JSON.stringify([group, subgroup]);
      let row = rows.get(id);
      if (row === undefined) {
        row = {
          group,
          ...(subgroup === undefined ? {} : { subgroup }),
          requests: 0,
          answered: 0,
          inputTokens: 0,
          outputTokens: 0,
          costPicoUsd: 0n,
          cacheHits: 0,
          costSavedPicoUsd: 0n,
        };
        rows.set(id, row);
      }
      row.requests += 1;
      if (record.status >= 200 && record.status <= 299) row.answered += 1;
      row.inputTokens += record.inputTokens;
      row.outputTokens += record.outputTokens;
      row.costPicoUsd += BigInt(record.costPicoUsd);
      if (record.cache === 'hit') row.cacheHits += 1;
      row.costSavedPicoUsd += BigInt(record.costSavedPicoUsd ?? 0);
    }
    return [...rows.values()];
  }
}
