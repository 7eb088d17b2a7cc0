import { setImmediate as turn } from 'node:timers/promises';
import test from 'ava';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { usageRecorder, type RecorderTimers, type UsageRecorderOptions } from '../../lib/usage/usage-recorder.js';
import { usageReport } from '../../lib/usage/usage-report.js';
import { usageSpans } from '../../lib/usage/usage-rollups.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';

// Usage: the recorder that batches the records into their store, and the report made of them.

// usageRecorder.

/** Timers on a clock the test moves: no test waits for real time. */
function fakeClock() {
  let now = 0;
  let next = 0;
  const due = new Map<number, { at: number; callback: () => void }>();
  const timers: RecorderTimers = {
    setTimeout(callback, ms) {
      next += 1;
      due.set(next, { at: now + ms, callback });
      return next;
    },
    clearTimeout: (handle) => due.delete(handle as number),
  };
  return {
    timers,
    /** Moves the clock, fires what is due, and lets the writes it started run. */
    async advance(ms: number) {
      now += ms;
      for (const [handle, timer] of [...due]) {
        if (timer.at <= now) {
          due.delete(handle);
          timer.callback();
        }
      }
      await settle();
    },
  };
}

/** Lets promise chains and the store's writes run. */
const settle = async () => {
  for (let i = 0; i < 5; i += 1) await turn();
};

/** A store that records each insert and how many ran at once, and fails when told. */
class TestStore extends MemoryUsageStore {
  inserts: UsageRecord[][] = [];
  failing = false;
  active = 0;
  mostActive = 0;

  override async insert(records: readonly UsageRecord[]): Promise<void> {
    this.active += 1;
    this.mostActive = Math.max(this.mostActive, this.active);
    try {
      await turn(); // a database takes a while
      if (this.failing) throw new Error('database is down');
      this.inserts.push([...records]);
      await super.insert(records);
    } finally {
      this.active -= 1;
    }
  }
}

function recorder(options: Partial<UsageRecorderOptions> = {}) {
  const clock = fakeClock();
  const store = new TestStore();
  const errors: Error[] = [];
  const made = usageRecorder({ store, timers: clock.timers, onError: (err) => errors.push(err), ...options });
  return { recorder: made, store, clock, errors };
}

const many = (count: number) => Array.from({ length: count }, (_, i) => usageRecord({ inputTokens: i }));
const ids = (records: UsageRecord[]) => records.map((record) => record.requestId);

test('records wait in memory until maxBatch of them are there, then are written as one batch', async (t) => {
  const { recorder: r, store } = recorder({ maxBatch: 100 });
  const records = many(100);
  for (const record of records.slice(0, 99)) r.record(record);
  await settle();
  t.deepEqual(store.inserts, []);
  t.is(r.pending, 99);
  r.record(records[99]!);
  t.deepEqual(store.inserts, [], 'record() itself never writes');
  await settle();
  t.deepEqual(store.inserts.map(ids), [ids(records)]);
  t.is(r.pending, 0);
});

test('a few records are written flushIntervalMs after the first, not before', async (t) => {
  const { recorder: r, store, clock } = recorder({ flushIntervalMs: 1000 });
  const records = many(3);
  r.record(records[0]!);
  await clock.advance(600);
  r.record(records[1]!);
  r.record(records[2]!);
  await clock.advance(399);
  t.deepEqual(store.inserts, []);
  await clock.advance(1);
  t.deepEqual(store.inserts.map(ids), [ids(records)]);
});

test('flush() writes everything queued in batches of maxBatch, in order, one insert at a time, and resolves once written', async (t) => {
  const { recorder: r, store } = recorder({ maxBatch: 100, maxBuffered: 1000 });
  const records = many(250);
  for (const record of records) r.record(record);
  await r.flush();
  t.deepEqual(
    store.inserts.map((batch) => batch.length),
    [100, 100, 50],
  );
  t.deepEqual(
    store.inserts.flat().map((record) => record.requestId),
    ids(records),
  );
  t.is(store.mostActive, 1);
  t.is(r.pending, 0);
});

test('a failed write keeps its records, reports once, and tries again on the timer, not at every record', async (t) => {
  const { recorder: r, store, clock, errors } = recorder({ maxBatch: 10, flushIntervalMs: 1000 });
  store.failing = true;
  const records = many(25);
  for (const record of records.slice(0, 10)) r.record(record);
  await settle();
  t.is(errors.length, 1);
  t.regex(errors[0]!.message, /10 usage records not written yet/);
  t.is((errors[0]!.cause as Error).message, 'database is down');
  for (const record of records.slice(10)) r.record(record);
  await settle();
  t.is(errors.length, 1, 'no new try before the timer');
  t.is(r.pending, 25);

  await clock.advance(1000);
  t.is(errors.length, 2, 'the timer tried again');
  store.failing = false;
  await clock.advance(1000);
  t.deepEqual(
    store.inserts.flat().map((record) => record.requestId),
    ids(records),
    'each record once, in order',
  );
  t.is(r.pending, 0);
  t.is(r.dropped, 0);
});

test('while the store is down the buffer stops at maxBuffered: later records are dropped, counted and reported once', async (t) => {
  const { recorder: r, store, clock, errors } = recorder({ maxBatch: 100, maxBuffered: 200 });
  store.failing = true;
  const records = many(250);
  for (const record of records.slice(0, 100)) r.record(record);
  for (let i = 0; i < 3; i += 1) await Promise.resolve(); // the first 100 are being written now
  for (const record of records.slice(100)) r.record(record);
  t.is(r.pending, 200, 'the batch being written counts toward maxBuffered');
  t.is(r.dropped, 50);
  await settle();
  t.is(errors.filter((err) => /dropped: 200 records wait/.test(err.message)).length, 1);
  store.failing = false;
  await clock.advance(1000);
  t.is(store.inserts.flat().length, 200);
  // After a write succeeded, a new outage is reported again.
  store.failing = true;
  for (const record of many(201)) r.record(record);
  await settle();
  t.is(errors.filter((err) => /dropped/.test(err.message)).length, 2);
});

test('close() writes what is queued; records after it are dropped and reported', async (t) => {
  const { recorder: r, store, errors } = recorder();
  const records = many(5);
  for (const record of records) r.record(record);
  await r.close();
  t.deepEqual(store.inserts.map(ids), [ids(records)]);
  r.record(usageRecord());
  t.is(r.dropped, 1);
  t.regex(errors[0]?.message ?? '', /dropped: the recorder is closed/);
  await r.close();
  t.is(store.inserts.length, 1);
});

test('close() with the store down tries once, then reports the records it lost', async (t) => {
  const { recorder: r, store, errors } = recorder();
  store.failing = true;
  for (const record of many(7)) r.record(record);
  await r.close();
  t.is(r.pending, 0);
  t.is(r.dropped, 7);
  t.deepEqual(
    errors.map((err) => err.message),
    [
      'koa-model-gateway: 7 usage records not written yet, kept for the next try',
      'koa-model-gateway: 7 usage records lost at close: the store did not take them',
    ],
  );
});

test('an onError hook that throws does not make a write an unhandled rejection', async (t) => {
  const {
    recorder: r,
    store,
    clock,
  } = recorder({
    onError: () => {
      throw new Error('bad hook');
    },
  });
  store.failing = true;
  r.record(usageRecord());
  await clock.advance(1000);
  await t.notThrowsAsync(r.flush());
  t.is(r.pending, 1);
});

test('a malformed record is a TypeError at record() and is not queued', (t) => {
  const { recorder: r } = recorder();
  const bad: Array<Partial<UsageRecord>> = [
    { inputTokens: -1 },
    { outputTokens: 1.5 },
    { status: 42 },
    { keyId: '' },
    { model: undefined as unknown as null },
    { stream: 'yes' as unknown as boolean },
    { upstreamMs: Number.NaN },
    { latencyMs: -1 },
  ];
  for (const overrides of bad) {
    t.throws(() => r.record(usageRecord(overrides)), { instanceOf: TypeError, message: /^koa-model-gateway: usage record has an invalid '/ });
  }
  t.is(r.pending, 0);
});

test('options are checked when the recorder is made', (t) => {
  const store = new MemoryUsageStore();
  for (const bad of [{ maxBatch: 0 }, { flushIntervalMs: 1.5 }, { maxBuffered: 50, maxBatch: 100 }, { store: {} as MemoryUsageStore }]) {
    t.throws(() => usageRecorder({ store, ...bad }), { instanceOf: TypeError, message: /^koa-model-gateway: usageRecorder\(\)/ });
  }
});

// usageReport.

/** A store holding four calls of two accounts over three days. */
async function fourCalls() {
  const usage = new MemoryUsageStore();
  await usage.insert([
    usageRecord({ time: Date.parse('2030-01-16T08:00:00Z'), model: 'b-model', keyId: 'key_b', inputTokens: 1, outputTokens: 2, costPicoUsd: 300_000 }),
    usageRecord({
      time: Date.parse('2030-01-14T08:00:00Z'),
      model: null,
      provider: null,
      keyId: 'key_B',
      status: 400,
      inputTokens: 0,
      outputTokens: 0,
      costPicoUsd: 0,
    }),
    usageRecord({
      time: Date.parse('2030-01-15T08:00:00Z'),
      model: 'a-model',
      keyId: 'key_a',
      inputTokens: 10,
      outputTokens: 20,
      costPicoUsd: 10_000_000_000_000,
    }),
    usageRecord({
      time: Date.parse('2030-01-16T09:00:00Z'),
      model: 'a-model',
      keyId: 'key_a',
      account: 'globex',
      inputTokens: 100,
      outputTokens: 200,
      costPicoUsd: 5_000_000,
    }),
  ]);
  return usage;
}

test('rows come in day order, or by id in byte order with calls without a model last; totals add every row', async (t) => {
  const usage = await fourCalls();
  const byDay = await usageReport(usage);
  t.is(byDay.by, 'day');
  t.deepEqual(
    byDay.rows.map((row) => row.group),
    ['2030-01-14', '2030-01-15', '2030-01-16'],
  );
  t.deepEqual(byDay.totals, { requests: 4, answered: 3, refused: 1, inputTokens: 111, outputTokens: 222, costUsd: 10.0000053, cacheHits: 0, costSavedUsd: 0 });
  t.deepEqual(
    (await usageReport(usage, { by: 'model' })).rows.map((row) => row.group),
    ['a-model', 'b-model', null],
  );
  t.deepEqual(
    (await usageReport(usage, { by: 'key' })).rows.map((row) => row.group),
    ['key_B', 'key_a', 'key_b'],
  );
});

test('the filters narrow the totals as well as the rows', async (t) => {
  const usage = await fourCalls();
  const report = await usageReport(usage, { account: 'acme', since: Date.parse('2030-01-15T00:00:00Z'), by: 'key' });
  t.deepEqual(report, {
    by: 'key',
    series: null,
    totals: { requests: 2, answered: 2, refused: 0, inputTokens: 11, outputTokens: 22, costUsd: 10.0000003, cacheHits: 0, costSavedUsd: 0 },
    rows: [
      { group: 'key_a', requests: 1, answered: 1, refused: 0, inputTokens: 10, outputTokens: 20, costUsd: 10, cacheHits: 0, costSavedUsd: 0 },
      { group: 'key_b', requests: 1, answered: 1, refused: 0, inputTokens: 1, outputTokens: 2, costUsd: 0.0000003, cacheHits: 0, costSavedUsd: 0 },
    ],
  });
});

test('with series, each row is split by the second grouping, in the same order, adding up to the row', async (t) => {
  const usage = await fourCalls();
  await usage.insert([
    usageRecord({
      time: Date.parse('2030-01-16T10:00:00Z'),
      model: 'a-model',
      keyId: 'key_b',
      inputTokens: 1000,
      outputTokens: 2000,
      costPicoUsd: 1_000_000_000_000,
    }),
  ]);
  const report = await usageReport(usage, { account: 'acme', by: 'day', series: 'model' });
  t.is(report.series, 'model');
  t.deepEqual(report.totals, {
    requests: 4,
    answered: 3,
    refused: 1,
    inputTokens: 1011,
    outputTokens: 2022,
    costUsd: 11.0000003,
    cacheHits: 0,
    costSavedUsd: 0,
  });
  t.deepEqual(report.rows, [
    {
      group: '2030-01-14',
      requests: 1,
      answered: 0,
      refused: 1,
      inputTokens: 0,
      outputTokens: 0,
      costUsd: 0,
      cacheHits: 0,
      costSavedUsd: 0,
      series: [{ group: null, requests: 1, answered: 0, refused: 1, inputTokens: 0, outputTokens: 0, costUsd: 0, cacheHits: 0, costSavedUsd: 0 }],
    },
    {
      group: '2030-01-15',
      requests: 1,
      answered: 1,
      refused: 0,
      inputTokens: 10,
      outputTokens: 20,
      costUsd: 10,
      cacheHits: 0,
      costSavedUsd: 0,
      series: [{ group: 'a-model', requests: 1, answered: 1, refused: 0, inputTokens: 10, outputTokens: 20, costUsd: 10, cacheHits: 0, costSavedUsd: 0 }],
    },
    {
      group: '2030-01-16',
      requests: 2,
      answered: 2,
      refused: 0,
      inputTokens: 1001,
      outputTokens: 2002,
      costUsd: 1.0000003,
      cacheHits: 0,
      costSavedUsd: 0,
      series: [
        { group: 'a-model', requests: 1, answered: 1, refused: 0, inputTokens: 1000, outputTokens: 2000, costUsd: 1, cacheHits: 0, costSavedUsd: 0 },
        { group: 'b-model', requests: 1, answered: 1, refused: 0, inputTokens: 1, outputTokens: 2, costUsd: 0.0000003, cacheHits: 0, costSavedUsd: 0 },
      ],
    },
  ]);
  const byKey = await usageReport(usage, { by: 'key', series: 'day' });
  t.deepEqual(
    byKey.rows.map((row) => [row.group, row.series?.map((entry) => entry.group)]),
    [
      ['key_B', ['2030-01-14']],
      ['key_a', ['2030-01-15', '2030-01-16']],
      ['key_b', ['2030-01-16']],
    ],
  );
});

test('a query that is not one is a TypeError', async (t) => {
  const usage = await fourCalls();
  await t.throwsAsync(usageReport(usage, { by: 'month' as 'day' }), { instanceOf: TypeError });
  await t.throwsAsync(usageReport(usage, { since: Number.NaN }), { instanceOf: TypeError });
  await t.throwsAsync(usageReport(usage, { by: 'day', series: 'day' }), { instanceOf: TypeError });
  await t.throwsAsync(usageReport(usage, { series: 'hour' as 'day' }), { instanceOf: TypeError });
});

// usageSpans.

test('a summary since a time reads at most 12 hours of hourly roll-ups: a partial day is its whole day less its first hours when they are fewer', (t) => {
  const day = Date.parse('2030-03-02T00:00:00.000Z');
  const HOUR = 3_600_000;
  // 01:30: the records of 01:30–02:00, the whole day less its hours before 02:00.
  t.deepEqual(usageSpans(day + 1.5 * HOUR), {
    raw: { since: day + 1.5 * HOUR, until: day + 2 * HOUR },
    hourly: { since: day, until: day + 2 * HOUR, subtract: true },
    daily: { sinceDay: '2030-03-02' },
  });
  // 12:00: 12 hours either way, added.
  t.deepEqual(usageSpans(day + 12 * HOUR), { hourly: { since: day + 12 * HOUR, until: day + 24 * HOUR }, daily: { sinceDay: '2030-03-03' } });
  // 22:30: the records to 23:00, the hour after, then the days after.
  t.deepEqual(usageSpans(day + 22.5 * HOUR), {
    raw: { since: day + 22.5 * HOUR, until: day + 23 * HOUR },
    hourly: { since: day + 23 * HOUR, until: day + 24 * HOUR },
    daily: { sinceDay: '2030-03-03' },
  });
  t.deepEqual(usageSpans(day + 23.5 * HOUR), { raw: { since: day + 23.5 * HOUR, until: day + 24 * HOUR }, daily: { sinceDay: '2030-03-03' } });
  t.deepEqual(usageSpans(day), { daily: { sinceDay: '2030-03-02' } });
  t.deepEqual(usageSpans(undefined), { daily: {} });
});
