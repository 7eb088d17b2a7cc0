import type { StoreContractTest } from './store-contract-test.js';
import type { UsageFilter, UsageGrouping, UsageRecord, UsageRow, UsageStore } from '../usage/usage-store.js';

const T0 = Date.parse('2030-01-15T12:00:00.000Z');
let sequence = 0;

/** A record of a successful streamed call, with `overrides`; each gets its own request id. */
export function usageRecord(overrides: Partial<UsageRecord> = {}): UsageRecord {
  sequence += 1;
  return {
    time: T0,
    requestId: `req_${String(sequence).padStart(32, '0')}`,
    keyId: 'key_a',
    account: 'acme',
    endpoint: '/v1/chat/completions',
    model: 'echo-1',
    provider: 'local',
    status: 200,
    stream: true,
    inputTokens: 10,
    outputTokens: 5,
    attachments: 0,
    latencyMs: 12.5,
    upstreamFirstByteMs: 3.25,
    upstreamMs: 9.75,
    costPicoUsd: 0,
    ...overrides,
  };
}

/** A small seeded generator (mulberry32): the same records on every run and store. */
function seeded(seed: number): (below: number) => number {
  let state = seed >>> 0;
  return (below) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state);
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed;
    return Math.floor((((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296) * below);
  };
}

const GROUP_OF: Record<UsageGrouping, (record: UsageRecord) => string | null> = {
  day: (record) => new Date(record.time).toISOString().slice(0, 10),
  model: (record) => record.model,
  key: (record) => record.keyId,
};

/** What `summarize` must answer, summed from the records themselves. */
function expectedSummary(records: readonly UsageRecord[], filter: UsageFilter, by: UsageGrouping, thenBy?: UsageGrouping): string[] {
  const rows = new Map<string, UsageRow>();
  for (const record of records) {
    if (filter.account !== undefined && record.account !== filter.account) continue;
    if (filter.keyId !== undefined && record.keyId !== filter.keyId) continue;
    if (filter.since !== undefined && record.time < filter.since) continue;
    const group = GROUP_OF[by](record);
    const subgroup = thenBy === undefined ? undefined : GROUP_OF[thenBy](record);
    const id = JSON.stringify([group, subgroup]);
    const row = rows.get(id) ?? {
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
    row.requests += 1;
    if (record.status >= 200 && record.status <= 299) row.answered += 1;
    row.inputTokens += record.inputTokens;
    row.outputTokens += record.outputTokens;
    row.costPicoUsd += BigInt(record.costPicoUsd);
    if (record.cache === 'hit') row.cacheHits += 1;
    row.costSavedPicoUsd += BigInt(record.costSavedPicoUsd ?? 0);
    rows.set(id, row);
  }
  return sortedRows([...rows.values()]);
}

const sortedRows = (rows: UsageRow[]) =>
  rows.map((row) => JSON.stringify(row, (_, value: unknown) => (typeof value === 'bigint' ? `${value}n` : value))).sort();

const byGroup = (rows: UsageRow[]) => [...rows].sort((a, b) => String(a.group).localeCompare(String(b.group)));

/** The behaviour every UsageStore must have; run once per implementation. */
export function usageStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<UsageStore>): void {
  test(`${name}: a record is read back with every field exactly as written`, async (t) => {
    const store = await makeStore();
    const records = [
      usageRecord({
        inputTokens: 9_000_000_000,
        outputTokens: 123_456,
        attachments: 3,
        latencyMs: 1234.0625,
        costPicoUsd: 4_500_000_300_000,
        traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      }),
      usageRecord({
        endpoint: '/v1/messages',
        model: null,
        provider: null,
        status: 429,
        stream: false,
        inputTokens: 0,
        outputTokens: 0,
        upstreamFirstByteMs: null,
        upstreamMs: null,
        time: T0 + 1,
      }),
      // Text the JSON of a batch escapes, and a double that needs all its 17 digits.
      usageRecord({ account: 'ācme "quoted" \\ \u2028 😀', model: 'm\n\t"1"', latencyMs: 0.1 + 0.2, upstreamMs: 1 / 3, time: T0 + 2 }),
    ];
    await store.insert(records);
    t.deepEqual(await store.list(), [records[2], records[1], records[0]]);
  });

  test(`${name}: list is newest first, the last inserted first among equal times, and takes a limit`, async (t) => {
    const store = await makeStore();
    const [a, b, c, d] = [usageRecord({ time: T0 + 5 }), usageRecord({ time: T0 }), usageRecord({ time: T0 }), usageRecord({ time: T0 + 9 })];
    await store.insert([a!, b!]);
    await store.insert([c!, d!]);
    t.deepEqual(
      (await store.list()).map((record) => record.requestId),
      [d!, a!, c!, b!].map((record) => record.requestId),
    );
    t.deepEqual(
      (await store.list({ limit: 2 })).map((record) => record.requestId),
      [d!.requestId, a!.requestId],
    );
  });

  test(`${name}: list and summarize filter by account, key and since (inclusive)`, async (t) => {
    const store = await makeStore();
    await store.insert([
      usageRecord({ account: 'acme', keyId: 'key_a', time: T0 - 1, inputTokens: 1, outputTokens: 1 }),
      usageRecord({ account: 'acme', keyId: 'key_a', time: T0, inputTokens: 2, outputTokens: 20 }),
      usageRecord({ account: 'acme', keyId: 'key_b', time: T0 + 1, inputTokens: 4, outputTokens: 40 }),
      usageRecord({ account: 'globex', keyId: 'key_c', time: T0 + 2, inputTokens: 8, outputTokens: 80 }),
    ]);
    const cases: Array<[Parameters<UsageStore['list']>[0], number, number]> = [
      [{}, 4, 15],
      [{ account: 'acme' }, 3, 7],
      [{ keyId: 'key_a' }, 2, 3],
      [{ since: T0 }, 3, 14],
      [{ account: 'acme', keyId: 'key_b', since: T0 }, 1, 4],
      [{ account: 'acme', keyId: 'key_c' }, 0, 0],
      [{ since: T0 + 3 }, 0, 0],
    ];
    for (const [filter, count, input] of cases) {
      t.is((await store.list(filter)).length, count, JSON.stringify(filter));
      const rows = await store.summarize(filter ?? {}, 'key');
      t.is(
        rows.reduce((sum, row) => sum + row.requests, 0),
        count,
        JSON.stringify(filter),
      );
      t.is(
        rows.reduce((sum, row) => sum + row.inputTokens, 0),
        input,
        JSON.stringify(filter),
      );
    }
  });

  test(`${name}: a fractional time (a performance clock) is kept to its millisecond, and a fractional since lets the same records through`, async (t) => {
    const store = await makeStore();
    const late = usageRecord({ time: Date.parse('2030-01-15T23:59:59.999Z') + 0.75 });
    const early = usageRecord({ time: T0 + 0.25 });
    await store.insert([early, late]);
    t.deepEqual(await store.list(), [
      { ...late, time: Date.parse('2030-01-15T23:59:59.999Z') },
      { ...early, time: T0 },
    ]);
    t.deepEqual(
      (await store.list({ since: T0 + 0.5 })).map((record) => record.requestId),
      [late.requestId],
    );
    t.deepEqual((await store.list({ since: T0 - 0.5 })).length, 2);
    t.deepEqual(await store.summarize({ since: T0 - 0.5 }, 'day'), [
      { group: '2030-01-15', requests: 2, answered: 2, inputTokens: 20, outputTokens: 10, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
    ]);
  });

  test(`${name}: summarize by day counts requests and sums tokens per UTC day`, async (t) => {
    const store = await makeStore();
    await store.insert([
      usageRecord({ time: Date.parse('2030-01-15T23:59:59.999Z'), inputTokens: 1, outputTokens: 2 }),
      usageRecord({ time: Date.parse('2030-01-15T00:00:00.000Z'), inputTokens: 10, outputTokens: 20 }),
      usageRecord({ time: Date.parse('2030-01-16T00:00:00.000Z'), inputTokens: 100, outputTokens: 200, status: 500 }),
    ]);
    t.deepEqual(byGroup(await store.summarize({}, 'day')), [
      { group: '2030-01-15', requests: 2, answered: 2, inputTokens: 11, outputTokens: 22, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
      { group: '2030-01-16', requests: 1, answered: 0, inputTokens: 100, outputTokens: 200, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
    ]);
  });

  test(`${name}: summarize by model keeps calls without a model in a group of their own; by key, per key`, async (t) => {
    const store = await makeStore();
    await store.insert([
      usageRecord({ model: 'echo-1', keyId: 'key_a', inputTokens: 3, outputTokens: 4 }),
      usageRecord({ model: 'echo-2', keyId: 'key_a', inputTokens: 5, outputTokens: 6 }),
      usageRecord({ model: 'echo-1', keyId: 'key_b', inputTokens: 7, outputTokens: 8 }),
      usageRecord({ model: null, provider: null, keyId: 'key_b', status: 400, inputTokens: 0, outputTokens: 0 }),
    ]);
    t.deepEqual(byGroup(await store.summarize({}, 'model')), [
      { group: 'echo-1', requests: 2, answered: 2, inputTokens: 10, outputTokens: 12, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
      { group: 'echo-2', requests: 1, answered: 1, inputTokens: 5, outputTokens: 6, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
      { group: null, requests: 1, answered: 0, inputTokens: 0, outputTokens: 0, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
    ]);
    t.deepEqual(byGroup(await store.summarize({ account: 'acme' }, 'key')), [
      { group: 'key_a', requests: 2, answered: 2, inputTokens: 8, outputTokens: 10, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
      { group: 'key_b', requests: 2, answered: 1, inputTokens: 7, outputTokens: 8, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
    ]);
    t.deepEqual(await store.summarize({ account: 'nobody' }, 'day'), []);
  });

  test(`${name}: summarize with thenBy gives one row per group and subgroup that has records, filtered as without`, async (t) => {
    const store = await makeStore();
    const day1 = Date.parse('2030-01-15T10:00:00.000Z');
    const day2 = Date.parse('2030-01-16T10:00:00.000Z');
    await store.insert([
      usageRecord({ time: day1, model: 'echo-1', keyId: 'key_a', inputTokens: 1, outputTokens: 2 }),
      usageRecord({ time: day1 + 1, model: 'echo-1', keyId: 'key_b', inputTokens: 10, outputTokens: 20 }),
      usageRecord({ time: day1 + 2, model: 'echo-2', keyId: 'key_a', inputTokens: 100, outputTokens: 200 }),
      usageRecord({ time: day2, model: null, provider: null, keyId: 'key_a', status: 400, inputTokens: 0, outputTokens: 0 }),
      usageRecord({ time: day2 + 1, model: 'echo-1', keyId: 'key_c', account: 'globex', inputTokens: 1000, outputTokens: 2000 }),
    ]);
    const bySubgroup = (rows: UsageRow[]) => [...rows].sort((a, b) => `${a.group}/${a.subgroup}`.localeCompare(`${b.group}/${b.subgroup}`));
    t.deepEqual(bySubgroup(await store.summarize({}, 'day', 'model')), [
      {
        group: '2030-01-15',
        subgroup: 'echo-1',
        requests: 2,
        answered: 2,
        inputTokens: 11,
        outputTokens: 22,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      },
      {
        group: '2030-01-15',
        subgroup: 'echo-2',
        requests: 1,
        answered: 1,
        inputTokens: 100,
        outputTokens: 200,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      },
      {
        group: '2030-01-16',
        subgroup: 'echo-1',
        requests: 1,
        answered: 1,
        inputTokens: 1000,
        outputTokens: 2000,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      },
      { group: '2030-01-16', subgroup: null, requests: 1, answered: 0, inputTokens: 0, outputTokens: 0, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
    ]);
    t.deepEqual(bySubgroup(await store.summarize({ account: 'acme', since: day1 + 1 }, 'day', 'key')), [
      {
        group: '2030-01-15',
        subgroup: 'key_a',
        requests: 1,
        answered: 1,
        inputTokens: 100,
        outputTokens: 200,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      },
      {
        group: '2030-01-15',
        subgroup: 'key_b',
        requests: 1,
        answered: 1,
        inputTokens: 10,
        outputTokens: 20,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      },
      {
        group: '2030-01-16',
        subgroup: 'key_a',
        requests: 1,
        answered: 0,
        inputTokens: 0,
        outputTokens: 0,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      },
    ]);
    t.deepEqual(bySubgroup(await store.summarize({ keyId: 'key_a' }, 'model', 'day')), [
      {
        group: 'echo-1',
        subgroup: '2030-01-15',
        requests: 1,
        answered: 1,
        inputTokens: 1,
        outputTokens: 2,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      },
      {
        group: 'echo-2',
        subgroup: '2030-01-15',
        requests: 1,
        answered: 1,
        inputTokens: 100,
        outputTokens: 200,
        costPicoUsd: 0n,
        cacheHits: 0,
        costSavedPicoUsd: 0n,
      },
      { group: null, subgroup: '2030-01-16', requests: 1, answered: 0, inputTokens: 0, outputTokens: 0, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
    ]);
    t.deepEqual(await store.summarize({ account: 'nobody' }, 'day', 'model'), []);
  });

  test(`${name}: a batch larger than any one statement takes is stored whole; an empty one is nothing`, async (t) => {
    const store = await makeStore();
    await store.insert([]);
    await store.insert(Array.from({ length: 1201 }, (_, i) => usageRecord({ time: T0 + i, inputTokens: i })));
    t.deepEqual(await store.summarize({}, 'day'), [
      { group: '2030-01-15', requests: 1201, answered: 1201, inputTokens: 720_600, outputTokens: 6005, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
    ]);
  });

  test(`${name}: costs are kept and summed exactly, in picodollars, past what a double holds`, async (t) => {
    const store = await makeStore();
    // 9,007 USD and a bit: more picodollars than a double counts exactly (2^53), twice.
    const large = 9_007_199_254_740_991;
    await store.insert([
      usageRecord({ keyId: 'key_a', costPicoUsd: large }),
      usageRecord({ keyId: 'key_a', costPicoUsd: large }),
      usageRecord({ keyId: 'key_b', costPicoUsd: 300_000 }),
      usageRecord({ keyId: 'key_b', costPicoUsd: 1 }),
    ]);
    t.deepEqual(
      (await store.list({ keyId: 'key_b' })).map((record) => record.costPicoUsd),
      [1, 300_000],
    );
    t.deepEqual(
      byGroup(await store.summarize({}, 'key')).map((row) => [row.group, row.costPicoUsd]),
      [
        ['key_a', 18_014_398_509_481_982n],
        ['key_b', 300_001n],
      ],
    );
  });

  test(`${name}: calls answered from the response cache are read back, counted and what they saved summed`, async (t) => {
    const store = await makeStore();
    const records = [
      usageRecord({ cache: 'miss', costPicoUsd: 7_000_000 }),
      usageRecord({ cache: 'hit', costPicoUsd: 0, costSavedPicoUsd: 7_000_000, inputTokens: 0, outputTokens: 0, time: T0 + 1 }),
      usageRecord({ cache: 'hit', costPicoUsd: 0, costSavedPicoUsd: 7_000_000, inputTokens: 0, outputTokens: 0, keyId: 'key_b', time: T0 + 2 }),
    ];
    await store.insert(records);
    t.deepEqual(await store.list(), [records[2], records[1], records[0]]);
    t.deepEqual(
      byGroup(await store.summarize({}, 'key')).map((row) => [row.group, row.requests, row.cacheHits, row.costSavedPicoUsd]),
      [
        ['key_a', 2, 1, 7_000_000n],
        ['key_b', 1, 1, 7_000_000n],
      ],
    );
  });

  test(`${name}: records read or written are copies`, async (t) => {
    const store = await makeStore();
    const record = usageRecord();
    await store.insert([record]);
    record.inputTokens = 999;
    const [listed] = await store.list();
    t.is(listed?.inputTokens, 10);
    if (listed) listed.outputTokens = 999;
    t.is((await store.list())[0]?.outputTokens, 5);
  });

  test(`${name}: summaries equal the sums of the records, cache hits and their savings too, whatever the batches, the filter and the time since, and after prunes`, async (t) => {
    const store = await makeStore();
    const random = seeded(54);
    const HOUR = 3_600_000;
    const records: UsageRecord[] = [];
    // Three days from a midnight, some records on the hour or the day exactly.
    const start = Date.parse('2030-03-01T00:00:00.000Z');
    for (let batch = 0; batch < 12; batch += 1) {
      const size = 1 + random(40);
      const written = Array.from({ length: size }, () => {
        const record = usageRecord({
          time: start + (random(4) === 0 ? random(72) * HOUR : random(72 * HOUR)),
          account: ['acme', 'globex'][random(2)] as string,
          keyId: ['key_a', 'key_b', 'key_c'][random(3)] as string,
          endpoint: ['/v1/chat/completions', '/v1/messages'][random(2)] as string,
          model: ['echo-1', 'echo-2', null][random(3)] as string | null,
          status: [200, 200, 429, 502][random(4)] as number,
          inputTokens: random(5000),
          outputTokens: random(500),
          costPicoUsd: random(3) === 0 ? 0 : random(2_000_000_000) * 1000,
        });
        // A call of four answered from the response cache (at cost 0, saving what it cost once, past what a double holds when summed), some looked up and missed.
        const cache = [null, 'miss', 'hit', 'hit'][random(4)] as 'hit' | 'miss' | null;
        if (cache !== 'hit' || record.status !== 200) return { ...record, cache: cache === 'hit' ? 'miss' : cache };
        return { ...record, cache, costPicoUsd: 0, costSavedPicoUsd: random(3) === 0 ? 0 : random(2_000_000_000) * 1000 + 1 };
      });
      await store.insert(written);
      records.push(...written);
    }
    const sinces = [
      undefined,
      start,
      start + HOUR,
      start + 25 * HOUR + 1,
      start + 47 * HOUR - 1,
      start + random(72 * HOUR),
      start + random(72 * HOUR) + 0.5,
      start + 80 * HOUR,
    ];
    const filters: UsageFilter[] = [{}, { account: 'acme' }, { keyId: 'key_b' }, { account: 'globex', keyId: 'key_c' }];
    const groupings: Array<[UsageGrouping, UsageGrouping?]> = [['day'], ['model'], ['key'], ['day', 'model'], ['key', 'day'], ['model', 'key']];
    for (const since of sinces) {
      for (const [index, narrowing] of filters.entries()) {
        const filter = since === undefined ? narrowing : { ...narrowing, since };
        const [by, thenBy] = groupings[(index + sinces.indexOf(since)) % groupings.length] as [UsageGrouping, UsageGrouping?];
        t.deepEqual(
          sortedRows(await store.summarize(filter, by, thenBy)),
          expectedSummary(records, filter, by, thenBy),
          JSON.stringify({ filter, by, thenBy }),
        );
      }
    }
    if (store.prune === undefined) return;
    // Pruned in batches of 7: the records before 30 h, the roll-ups of the first day.
    const pruning = { recordsBefore: start + 30 * HOUR, rollupsBefore: start + 30 * HOUR, limit: 7 };
    const deleted = [];
    for (let count = await store.prune(pruning); count > 0; count = await store.prune(pruning)) deleted.push(count);
    // At most 7 from each table: the records and up to six roll-ups (the Knex store's: hourly and daily, full and by model; daily by account and model, and by key).
    t.true(deleted.length > 1 && deleted.every((count) => count <= 7 * 7), 'bounded batches');
    const kept = records.filter((record) => record.time >= start + 30 * HOUR);
    t.deepEqual((await store.list({ limit: records.length })).map((record) => record.requestId).sort(), kept.map((record) => record.requestId).sort());
    // Summaries of the days kept are whole: they read the roll-ups, not the records pruned.
    const sinceSecondDay = records.filter((record) => record.time >= start + 24 * HOUR);
    t.deepEqual(sortedRows(await store.summarize({}, 'day', 'model')), expectedSummary(sinceSecondDay, {}, 'day', 'model'));
    for (const since of [start + 24 * HOUR, start + 29 * HOUR, start + 30 * HOUR + 1, start + 50 * HOUR - 1]) {
      t.deepEqual(
        sortedRows(await store.summarize({ account: 'acme', since }, 'key', 'model')),
        expectedSummary(records, { account: 'acme', since }, 'key', 'model'),
        String(since),
      );
    }
  });

  test(`${name}: page walks the records newest first by keyset, each once, filtered by account, key, model, status and time`, async (t) => {
    const store = await makeStore();
    if (store.page === undefined) return void t.is(store.page, undefined, 'a store without a request log');
    const records = Array.from({ length: 11 }, (_, i) =>
      usageRecord({
        time: T0 + Math.floor(i / 3),
        keyId: i % 2 === 0 ? 'key_a' : 'key_b',
        model: i % 4 === 0 ? null : 'echo-1',
        status: i % 5 === 0 ? 429 : 200,
      }),
    );
    await store.insert(records.slice(0, 6));
    await store.insert(records.slice(6));
    const walk = async (filter: Parameters<NonNullable<UsageStore['page']>>[0], limit: number) => {
      const ids: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.page!(filter, { limit, ...(cursor === undefined ? {} : { cursor }) });
        t.true(page.records.length <= limit);
        ids.push(...page.records.map((record) => record.requestId));
        cursor = page.nextCursor ?? undefined;
        // A newer record written meanwhile is not on the older pages.
        if (cursor !== undefined) await store.insert([usageRecord({ time: T0 + 100 })]);
      } while (cursor !== undefined);
      return ids;
    };
    const newestFirst = [...records].reverse();
    const ids = (kept: UsageRecord[]) => kept.map((record) => record.requestId);
    t.deepEqual(await walk({ until: T0 + 100 }, 3), ids(newestFirst));
    t.deepEqual(await walk({ keyId: 'key_b', until: T0 + 100 }, 2), ids(newestFirst.filter((record) => record.keyId === 'key_b')));
    t.deepEqual(
      await walk({ model: 'echo-1', status: 200, account: 'acme', until: T0 + 100 }, 4),
      ids(newestFirst.filter((record) => record.model === 'echo-1' && record.status === 200)),
    );
    t.deepEqual(await walk({ since: T0 + 1, until: T0 + 3 }, 10), ids(newestFirst.filter((record) => record.time >= T0 + 1 && record.time < T0 + 3)));
    t.deepEqual(await store.page({ account: 'nobody' }, { limit: 5 }), { records: [], nextCursor: null });
    const [first] = (await store.page({ until: T0 + 100 }, { limit: 1 })).records;
    t.deepEqual(first, records[10], 'every field as written');
  });

  test(`${name}: rollups walks the hourly and daily roll-up rows oldest first, a page at a time, each the sum of its records`, async (t) => {
    const store = await makeStore();
    if (store.rollups === undefined) return void t.is(store.rollups, undefined, 'a store without roll-up exports');
    const HOUR = 3_600_000;
    const start = Date.parse('2030-03-01T00:00:00.000Z');
    const records = Array.from({ length: 40 }, (_, i) =>
      usageRecord({
        time: start + ((i * 7) % 50) * HOUR + i,
        account: i % 3 === 0 ? 'globex' : 'acme',
        keyId: `key_${i % 2}`,
        model: i % 5 === 0 ? null : 'echo-1',
        status: i % 4 === 0 ? 429 : 200,
        inputTokens: i,
        costPicoUsd: i % 6 === 1 ? 0 : i * 1000,
        ...(i % 6 === 1 && { cache: 'hit' as const, costSavedPicoUsd: i * 2000 }),
      }),
    );
    await store.insert(records.slice(0, 25));
    await store.insert(records.slice(25));
    for (const period of ['hour', 'day'] as const) {
      const unit = period === 'hour' ? HOUR : 24 * HOUR;
      const filter = { account: 'acme', since: start + 1, until: start + 30 * HOUR };
      // Periods that start in [since, until): since rounded up to a whole period, as until.
      const [first, end] = [Math.ceil(filter.since / unit) * unit, Math.ceil(filter.until / unit) * unit];
      const expected = new Map<string, { requests: number; inputTokens: number; costPicoUsd: bigint; cacheHits: number; costSavedPicoUsd: bigint }>();
      for (const record of records) {
        const period = record.time - (record.time % unit);
        if (record.account !== 'acme' || period < first || period >= end) continue;
        const id = JSON.stringify([period, record.account, record.keyId, record.model ?? '', record.endpoint, record.status]);
        const sum = expected.get(id) ?? { requests: 0, inputTokens: 0, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n };
        expected.set(id, {
          requests: sum.requests + 1,
          inputTokens: sum.inputTokens + record.inputTokens,
          costPicoUsd: sum.costPicoUsd + BigInt(record.costPicoUsd),
          cacheHits: sum.cacheHits + (record.cache === 'hit' ? 1 : 0),
          costSavedPicoUsd: sum.costSavedPicoUsd + BigInt(record.costSavedPicoUsd ?? 0),
        });
      }
      const walked: string[] = [];
      let after: Parameters<NonNullable<UsageStore['rollups']>>[2]['after'];
      for (;;) {
        const rows = await store.rollups(period, filter, { limit: 3, ...(after === undefined ? {} : { after }) });
        t.true(rows.length <= 3);
        for (const row of rows) {
          const id = JSON.stringify([row.period, row.account, row.keyId, row.model ?? '', row.endpoint, row.status]);
          walked.push(id);
          const { requests, inputTokens, costPicoUsd, cacheHits, costSavedPicoUsd } = row;
          t.deepEqual({ requests, inputTokens, costPicoUsd, cacheHits, costSavedPicoUsd }, expected.get(id), id);
        }
        if (rows.length < 3) break;
        after = rows.at(-1);
      }
      t.deepEqual([...walked].sort(), [...expected.keys()].sort(), `${period}: each row once`);
      const periods = walked.map((id) => JSON.parse(id)[0] as number);
      t.deepEqual(
        periods,
        [...periods].sort((a, b) => a - b),
        `${period}: oldest first`,
      );
    }
  });
}
