import test from 'ava';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { usageReport } from '../../lib/usage/usage-report.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';

async function store() {
  const usage = new MemoryUsageStore();
  await usage.insert([
    usageRecord({ time: Date.parse('2030-01-16T08:00:00Z'), model: 'b-model', keyId: 'key_b', inputTokens: 1, outputTokens: 2, costPicoUsd: 300_000 }),
    usageRecord({ time: Date.parse('2030-01-14T08:00:00Z'), model: null, provider: null, keyId: 'key_B', status: 400, inputTokens: 0, outputTokens: 0, costPicoUsd: 0 }),
    usageRecord({ time: Date.parse('2030-01-15T08:00:00Z'), model: 'a-model', keyId: 'key_a', inputTokens: 10, outputTokens: 20, costPicoUsd: 10_000_000_000_000 }),
    usageRecord({ time: Date.parse('2030-01-16T09:00:00Z'), model: 'a-model', keyId: 'key_a', account: 'globex', inputTokens: 100, outputTokens: 200, costPicoUsd: 5_000_000 }),
  ]);
  return usage;
}

test('rows come in day order, or by id in byte order with calls without a model last; totals add every row', async (t) => {
  const usage = await store();
  const byDay = await usageReport(usage);
  t.is(byDay.by, 'day');
  t.deepEqual(byDay.rows.map((row) => row.group), ['2030-01-14', '2030-01-15', '2030-01-16']);
  t.deepEqual(byDay.totals, { requests: 4, answered: 3, refused: 1, inputTokens: 111, outputTokens: 222, costUsd: 10.0000053 });
  t.deepEqual((await usageReport(usage, { by: 'model' })).rows.map((row) => row.group), ['a-model', 'b-model', null]);
  t.deepEqual((await usageReport(usage, { by: 'key' })).rows.map((row) => row.group), ['key_B', 'key_a', 'key_b']);
});

test('the filters narrow the totals as well as the rows', async (t) => {
  const usage = await store();
  const report = await usageReport(usage, { account: 'acme', since: Date.parse('2030-01-15T00:00:00Z'), by: 'key' });
  t.deepEqual(report, {
    by: 'key',
    series: null,
    totals: { requests: 2, answered: 2, refused: 0, inputTokens: 11, outputTokens: 22, costUsd: 10.0000003 },
    rows: [
      { group: 'key_a', requests: 1, answered: 1, refused: 0, inputTokens: 10, outputTokens: 20, costUsd: 10 },
      { group: 'key_b', requests: 1, answered: 1, refused: 0, inputTokens: 1, outputTokens: 2, costUsd: 0.0000003 },
    ],
  });
});

test('with series, each row is split by the second grouping, in the same order, adding up to the row', async (t) => {
  const usage = await store();
  await usage.insert([usageRecord({ time: Date.parse('2030-01-16T10:00:00Z'), model: 'a-model', keyId: 'key_b', inputTokens: 1000, outputTokens: 2000, costPicoUsd: 1_000_000_000_000 })]);
  const report = await usageReport(usage, { account: 'acme', by: 'day', series: 'model' });
  t.is(report.series, 'model');
  t.deepEqual(report.totals, { requests: 4, answered: 3, refused: 1, inputTokens: 1011, outputTokens: 2022, costUsd: 11.0000003 });
  t.deepEqual(report.rows, [
    { group: '2030-01-14', requests: 1, answered: 0, refused: 1, inputTokens: 0, outputTokens: 0, costUsd: 0, series: [{ group: null, requests: 1, answered: 0, refused: 1, inputTokens: 0, outputTokens: 0, costUsd: 0 }] },
    { group: '2030-01-15', requests: 1, answered: 1, refused: 0, inputTokens: 10, outputTokens: 20, costUsd: 10, series: [{ group: 'a-model', requests: 1, answered: 1, refused: 0, inputTokens: 10, outputTokens: 20, costUsd: 10 }] },
    {
      group: '2030-01-16',
      requests: 2, answered: 2, refused: 0,
      inputTokens: 1001,
      outputTokens: 2002,
      costUsd: 1.0000003,
      series: [
        { group: 'a-model', requests: 1, answered: 1, refused: 0, inputTokens: 1000, outputTokens: 2000, costUsd: 1 },
        { group: 'b-model', requests: 1, answered: 1, refused: 0, inputTokens: 1, outputTokens: 2, costUsd: 0.0000003 },
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
  const usage = await store();
  await t.throwsAsync(usageReport(usage, { by: 'month' as 'day' }), { instanceOf: TypeError });
  await t.throwsAsync(usageReport(usage, { since: Number.NaN }), { instanceOf: TypeError });
  await t.throwsAsync(usageReport(usage, { by: 'day', series: 'day' }), { instanceOf: TypeError });
  await t.throwsAsync(usageReport(usage, { series: 'hour' as 'day' }), { instanceOf: TypeError });
});
