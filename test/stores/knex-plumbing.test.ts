import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import knexFactory, { type Knex } from 'knex';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { unpartitionUsage } from '../../lib/stores/knex/usage-partitions.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import type { UsageFilter, UsageGrouping, UsageRecord } from '../../lib/usage/usage-store.js';
import { firstRowReader, type PreparedReads } from '../../lib/stores/knex/prepared-reads.js';
import { withinTimeout } from '../../lib/stores/knex/store-options.js';
import { until } from '../helpers/poll.js';
import { preparedReadsOn, type TestPreparedReads } from '../helpers/prepared-reads.js';
import { postgresDatabase, sqliteDatabase, withPostgres, type TestDatabase } from '../helpers/services.js';
import { runTogether } from '../helpers/worker-processes.js';

// What every Knex store stands on: the migrations, the prepared reads, the bound on each call.

const databases: TestDatabase[] = [];
const readers: TestPreparedReads[] = [];
test.after.always(async () => {
  await Promise.all(readers.map((reader) => reader.close()));
  await Promise.all(databases.map((db) => db.destroy()));
});

// Migrations.

const MIGRATE_WORKER = fileURLToPath(new URL('../helpers/migrate-worker.js', import.meta.url));
const LEGACY = join(process.cwd(), 'test/fixtures/migrated-before-knex-migrator.json');

async function openDatabase(kind: 'sqlite' | 'postgres'): Promise<TestDatabase> {
  const db = await (kind === 'sqlite' ? sqliteDatabase() : postgresDatabase());
  databases.push(db);
  return db;
}

async function migratedOnce(t: ExecutionContext, db: TestDatabase) {
  t.deepEqual(await db.knex('kmg_migrations_lock').select('index', 'is_locked'), [{ index: 1, is_locked: 0 }]);
  t.deepEqual(await db.knex('kmg_migrations').orderBy('id').pluck('name'), [
    '001_api_keys',
    '002_files',
    '003_key_limits',
    '004_usage',
    '005_admin_tokens_and_sessions',
    '006_key_version',
    '20261125_rotation_replaced_by',
    'cost_and_budgets',
    '20261125_keys_name_hint_links_last_used',
    '20261125_audit_log',
    '20261125_routing_attempts',
    '20261206_keys_original_id',
    '20261206_admin_users',
    '20261206_mcp',
    '20261206_response_cache',
    '20261207_usage_rollups',
    '20261207_usage_trace_id',
    '20261207_soft_budgets_alert_thresholds',
    '20261207_session_oidc_sid',
    '20261207_usage_partitions',
    '20261207_usage_request_log_indexes',
    '20261207_usage_coarser_rollups',
  ]);
  t.true(await db.knex.schema.hasTable('kmg_files'));
}

for (const [kind, gate] of [
  ['sqlite', test],
  ['postgres', withPostgres(test)],
] as const) {
  gate(`${kind}: four processes migrating a fresh database at the same moment all succeed, and migrate it once`, async (t) => {
    const db = await openDatabase(kind);
    await runTogether(
      MIGRATE_WORKER,
      Array.from({ length: 4 }, () => [JSON.stringify(db.config)]),
    );
    await migratedOnce(t, db);
  });

  gate(`${kind}: a database the earlier migrate() made (Knex's bookkeeping tables by hand) is taken as it is, and its stores keep working`, async (t) => {
    const db = await openDatabase(kind);
    const legacy = JSON.parse(await readFile(LEGACY, 'utf8')) as Record<typeof kind, string[]>;
    for (const statement of legacy[kind]) await db.knex.raw(statement);
    // A key as that schema stored it, before the later migrations added columns.
    const hash = 'a'.repeat(64);
    await db.knex('kmg_api_keys').insert({
      id: 'key_before',
      account: 'acme',
      hash,
      scopes: '["files:read"]',
      models: null,
      created_at: 1_700_000_000,
      expires_at: null,
      revoked_at: null,
    });
    await migrate(db.knex);
    await migratedOnce(t, db);
    t.deepEqual(await new KnexKeyStore(db.knex).findByHash(hash), {
      id: 'key_before',
      account: 'acme',
      hash,
      scopes: ['files:read'],
      models: null,
      createdAt: 1_700_000_000,
      expiresAt: null,
      revokedAt: null,
    });
  });

  gate(
    `${kind}: the usage roll-ups' migrations back-fill them from the records already there, cache hits and savings included, and those by model from the full ones`,
    async (t) => {
      const db = await openDatabase(kind);
      await migrate(db.knex);
      // The database as it was before those migrations, with records.
      await db.knex.raw(kind === 'postgres' ? 'drop function kmg_usage_roll_up() cascade' : 'drop trigger kmg_usage_roll_up');
      const coarser = ['kmg_usage_hourly_by_model', 'kmg_usage_daily_by_model', 'kmg_usage_daily_by_account', 'kmg_usage_daily_by_key'];
      for (const table of ['kmg_usage_hourly', 'kmg_usage_daily', ...coarser]) await db.knex.schema.dropTable(table);
      await db.knex('kmg_migrations').whereIn('name', ['20261207_usage_rollups', '20261207_usage_coarser_rollups']).delete();
      const call = {
        day: '2023-11-14',
        request_id: 'req_before',
        key_id: 'key_a',
        account: 'acme',
        endpoint: '/v1/chat/completions',
        provider: 'local',
        stream: false,
        attachments: 0,
        latency_ms: 1,
        cache: null,
        cost_saved_picousd: 0,
      };
      await db.knex('kmg_usage').insert([
        { ...call, time: 1_700_000_000_000, model: 'echo-1', status: 200, input_tokens: 10, output_tokens: 5 },
        { ...call, time: 1_700_000_000_001, model: null, status: 429, input_tokens: 0, output_tokens: 0 },
        { ...call, time: 1_700_000_000_002, model: 'echo-1', status: 200, input_tokens: 0, output_tokens: 0, cache: 'hit', cost_saved_picousd: 7_000_000 },
      ]);
      await migrate(db.knex);
      // The roll-ups the reports read are back-filled from the records already there.
      const byModel = [
        { group: 'echo-1', requests: 2, answered: 2, inputTokens: 10, outputTokens: 5, costPicoUsd: 0n, cacheHits: 1, costSavedPicoUsd: 7_000_000n },
        { group: null, requests: 1, answered: 0, inputTokens: 0, outputTokens: 0, costPicoUsd: 0n, cacheHits: 0, costSavedPicoUsd: 0n },
      ];
      const usage = new KnexUsageStore(db.knex);
      const sorted = (rows: Array<{ group: string | null }>) => rows.sort((a, b) => String(a.group).localeCompare(String(b.group)));
      t.deepEqual(sorted(await usage.summarize({}, 'model')), byModel, 'the daily roll-ups');
      t.deepEqual(sorted(await usage.summarize({ since: Date.parse('2023-11-14T22:00:00Z') }, 'model')), byModel, 'the hourly roll-ups');
      t.deepEqual(sorted(await usage.summarize({ account: 'acme' }, 'model')), byModel, 'the daily roll-ups by account');
      t.deepEqual(sorted(await usage.summarize({ keyId: 'key_a' }, 'model')), byModel, 'the full daily roll-ups');
      const byKey = { group: 'key_a', requests: 3, answered: 2, inputTokens: 10, outputTokens: 5, costPicoUsd: 0n, cacheHits: 1, costSavedPicoUsd: 7_000_000n };
      t.deepEqual(await usage.summarize({}, 'key'), [byKey], 'the daily roll-ups by key');
      // Before the coarser roll-ups, the records past their retention, and one more call the trigger adds.
      for (const table of coarser) await db.knex.schema.dropTable(table);
      await db.knex('kmg_migrations').where('name', '20261207_usage_coarser_rollups').delete();
      await db.knex.raw(kind === 'postgres' ? 'truncate kmg_usage' : 'delete from kmg_usage');
      await migrate(db.knex);
      await usage.insert([usageRecord({ time: 1_700_000_000_003, model: 'echo-1', status: 502, inputTokens: 0, outputTokens: 0 })]);
      const withFailure = [{ ...byModel[0], requests: 3 }, byModel[1]];
      t.deepEqual(sorted(await usage.summarize({}, 'model')), withFailure, 'the daily roll-ups by model, from the full ones');
      t.deepEqual(sorted(await usage.summarize({ since: Date.parse('2023-11-14T22:00:00Z') }, 'model')), withFailure, 'the hourly roll-ups by model');
      t.deepEqual(await usage.summarize({}, 'key'), [{ ...byKey, requests: 4 }], 'the daily roll-ups by key, from the full ones');
      t.deepEqual(sorted(await usage.summarize({ account: 'acme' }, 'model')), withFailure, 'the daily roll-ups by account, from the full ones');
    },
  );
}

// The usage reports' roll-ups.

/**
 * Each table `sql`'s plan reads (a partition of the records named as kmg_usage), with the
 * conditions of the index range it reads it by ('' for a whole table): SQLite's SCAN and SEARCH
 * details, PostgreSQL's scan nodes (whole-table and bitmap scans ruled out, as in `planOf`).
 */
async function tablesRead(knex: Knex, sql: string, bindings: readonly Knex.RawBinding[]): Promise<Map<string, string>> {
  const query = sql.replaceAll(/\$\d+/g, '?');
  const reads = new Map<string, string>();
  const add = (table: string, range: string) => {
    const name = /^kmg_usage_(p\d{8}|default)$/.test(table) ? 'kmg_usage' : table;
    reads.set(name, `${reads.get(name) ?? ''} ${range}`.trim());
  };
  if (knex.client.dialect !== 'postgresql') {
    for (const { detail } of (await knex.raw(`explain query plan ${query}`, bindings)) as Array<{ detail: string }>) {
      const scan = /^(SCAN|SEARCH) (\w+)(.*)$/.exec(detail);
      if (scan) add(scan[2] ?? '', scan[1] === 'SEARCH' ? (scan[3] ?? '') : '');
    }
    return reads;
  }
  return knex.transaction(async (trx) => {
    await trx.raw('set local enable_seqscan = off; set local enable_bitmapscan = off');
    const { rows } = (await trx.raw(`explain (format json) ${query}`, bindings)) as { rows: Array<{ 'QUERY PLAN': unknown }> };
    const visit = (node: Record<string, unknown>) => {
      if (typeof node['Relation Name'] === 'string') add(node['Relation Name'], String(node['Index Cond'] ?? ''));
      for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) visit(child);
    };
    visit((rows[0]!['QUERY PLAN'] as Array<{ Plan: Record<string, unknown> }>)[0]?.Plan ?? {});
    return reads;
  });
}

for (const [kind, gate] of [
  ['sqlite', test],
  ['postgres', withPostgres(test)],
] as const) {
  gate(
    `${kind}: a report reads the roll-ups by model unless it narrows to an account or key or groups by key, each by the index range its filter bounds`,
    async (t) => {
      const db = await openDatabase(kind);
      await migrate(db.knex);
      const usage = new KnexUsageStore(db.knex);
      const day = Date.parse('2030-01-15T00:00:00.000Z');
      await usage.insert(
        Array.from({ length: 200 }, (_, i) =>
          usageRecord({
            time: day - 40 * DAY + i * 5 * 3_600_000,
            account: `account-${i % 4}`,
            keyId: `key_${i % 8}`,
            model: i % 3 === 0 ? null : `model-${i % 5}`,
          }),
        ),
      );
      await db.knex.raw('analyze');
      const queries: Array<{ sql: string; bindings: readonly Knex.RawBinding[] }> = [];
      db.knex.on('query', ({ sql, bindings }: { sql: string; bindings?: readonly Knex.RawBinding[] }) => queries.push({ sql, bindings: bindings ?? [] }));
      const midHour = day + 12.5 * 3_600_000;
      // The tables each summary reads (one statement each), and the columns of the range it reads each by (an
      // account's index or the period's, whichever the planner picks, both bound the period).
      const summaries: Array<[UsageFilter, UsageGrouping, UsageGrouping | undefined, Record<string, string[]>]> = [
        // The dashboard's overview: the last 30 days by model, each split by day.
        [{ since: midHour }, 'model', 'day', { kmg_usage: ['time'], kmg_usage_hourly_by_model: ['hour'], kmg_usage_daily_by_model: ['day'] }],
        [{}, 'day', undefined, { kmg_usage_daily_by_model: [] }],
        [{ since: day }, 'day', 'model', { kmg_usage_daily_by_model: ['day'] }],
        // An account's figures by day, split by model.
        [{ account: 'account-1', since: midHour }, 'day', 'model', { kmg_usage: ['time'], kmg_usage_hourly: ['hour'], kmg_usage_daily_by_account: ['day'] }],
        [{ account: 'account-1' }, 'day', undefined, { kmg_usage_daily_by_account: ['account'] }],
        [{ account: 'account-1', keyId: 'key_1' }, 'model', undefined, { kmg_usage_daily: [] }],
        [{ keyId: 'key_1' }, 'day', undefined, { kmg_usage_daily_by_key: ['key_id'] }],
        // The accounts' summary: the month by key.
        [{ since: day - 14 * DAY }, 'key', undefined, { kmg_usage_daily_by_key: ['day'] }],
        [{ since: day - 14 * DAY }, 'key', 'model', { kmg_usage_daily: ['day'] }],
      ];
      for (const [filter, by, thenBy, expected] of summaries) {
        queries.length = 0;
        await usage.summarize(filter, by, thenBy);
        const reads = new Map<string, string>();
        // A copy: reading the plans makes queries too.
        for (const { sql, bindings } of [...queries]) for (const [table, range] of await tablesRead(db.knex, sql, bindings)) reads.set(table, range);
        const name = JSON.stringify({ filter, by, thenBy });
        t.deepEqual([...reads.keys()].sort(), Object.keys(expected).sort(), `${name}: the tables read`);
        for (const [table, columns] of Object.entries(expected)) {
          const range = reads.get(table) ?? '';
          t.true(
            columns.every((column) => new RegExp(`\\b${column}\\b`).test(range)),
            `${name}: ${table} read by ${columns.join(', ') || 'all its rows'}: ${range}`,
          );
        }
      }
    },
  );
}

// PostgreSQL's records partitioned by day (usage-partitions.ts).

const DAY = 86_400_000;
const partitionOf = (time: number) => `kmg_usage_p${new Date(time).toISOString().slice(0, 10).replaceAll('-', '')}`;
/** Each record's partition, by request id. */
async function placed(knex: Knex): Promise<Record<string, string>> {
  const { rows } = await knex.raw<{ rows: Array<{ part: string; request_id: string }> }>('select tableoid::regclass::text as part, request_id from kmg_usage');
  return Object.fromEntries(rows.map((row) => [row.request_id, row.part]));
}
/** The summary by day, in the days' order: a GROUP BY answers in any. */
async function daily(usage: KnexUsageStore) {
  return (await usage.summarize({}, 'day')).sort((a, b) => String(a.group).localeCompare(String(b.group)));
}
async function partitions(knex: Knex): Promise<string[]> {
  const { rows } = await knex.raw<{ rows: Array<{ name: string }> }>(
    "select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = to_regclass('kmg_usage') order by 1",
  );
  return rows.map((row) => row.name);
}

withPostgres(test)("postgres: the partitions' migration carries the records over into their days' partitions, the roll-ups unchanged, and back", async (t) => {
  const db = await openDatabase('postgres');
  await migrate(db.knex);
  const usage = new KnexUsageStore(db.knex);
  const now = Date.now();
  const records = [usageRecord({ time: now - 3 * DAY }), usageRecord({ time: now }), usageRecord({ time: now - 1000 * DAY, status: 429 })];
  await usage.insert(records);
  const summary = await daily(usage);
  // The migration undone: one table, as before it.
  await unpartitionUsage(db.knex);
  await db.knex.raw(
    'create trigger kmg_usage_roll_up after insert on kmg_usage referencing new table as inserted for each statement execute function kmg_usage_roll_up()',
  );
  await db.knex('kmg_migrations').where('name', '20261207_usage_partitions').delete();
  t.deepEqual(await placed(db.knex), Object.fromEntries(records.map((record) => [record.requestId, 'kmg_usage'])));
  await migrate(db.knex);
  const [old, today, older] = records as [UsageRecord, UsageRecord, UsageRecord];
  // Older than 400 days: in the default partition, which retention empties by batches.
  t.deepEqual(await placed(db.knex), { [old.requestId]: partitionOf(old.time), [today.requestId]: partitionOf(now), [older.requestId]: 'kmg_usage_default' });
  t.true((await partitions(db.knex)).includes(partitionOf(now + 3 * DAY)), 'the days ahead');
  t.deepEqual(await daily(usage), summary, 'the records counted once');
  const later = usageRecord({ time: now, model: 'echo-2' });
  await usage.insert([later]);
  t.is((await usage.summarize({}, 'model')).find((row) => row.group === 'echo-2')?.requests, 1, 'the trigger rolls up new records');
  t.deepEqual(
    (await usage.list({ limit: 1 })).map((record) => record.requestId),
    [later.requestId],
    'seq goes on from where it was',
  );
});

withPostgres(test)(
  'postgres: retention drops whole the days it has passed and the sweep makes the days ahead, from two instances at once, never waiting past its lock timeout',
  async (t) => {
    const db = await openDatabase('postgres');
    await migrate(db.knex);
    const [one, two] = [new KnexUsageStore(db.knex), new KnexUsageStore(db.knex)];
    const now = Date.now();
    const today = now - (now % DAY);
    const [kept, dropped, future] = [usageRecord({ time: today + DAY }), usageRecord({ time: today }), usageRecord({ time: today + 10 * DAY })];
    await one.insert([kept, dropped, future]);
    t.is((await placed(db.knex))[future.requestId], 'kmg_usage_default');
    const summary = await daily(one);

    // A query on kmg_usage under way holds the drop off: it gives up within its lock timeout, and the batches delete the day's record instead.
    const pruning = { recordsBefore: today + DAY, rollupsBefore: 0, limit: 100 };
    const report = await db.knex.transaction();
    try {
      await report.raw('select count(*) from kmg_usage');
      t.is(await one.prune(pruning), 1);
      t.true((await partitions(db.knex)).includes(partitionOf(today)));
    } finally {
      await report.commit();
    }

    // Two sweeps at once, nine days on: one makes each partition, the other finds it made.
    await Promise.all([one.prune({ ...pruning, now: now + 9 * DAY }), two.prune({ ...pruning, now: now + 9 * DAY })]);
    const made = await partitions(db.knex);
    t.false(made.includes(partitionOf(today)), 'the day past retention dropped whole');
    for (const day of [9, 10, 11, 12]) t.true(made.includes(partitionOf(now + day * DAY)), `day ${day} ahead`);
    // A day's record in the default partition moves into the partition made for it.
    t.deepEqual(await placed(db.knex), { [kept.requestId]: partitionOf(kept.time), [future.requestId]: partitionOf(future.time) });
    t.deepEqual(await daily(one), summary, 'the roll-ups keep what was dropped, and count the moved record once');
  },
);

test('migrate can run again on a migrated database', async (t) => {
  const db = await openDatabase('sqlite');
  await migrate(db.knex);
  await t.notThrowsAsync(migrate(db.knex));
});

withPostgres(test)('postgres: a migration waiting in one schema does not hold up the migration of another', async (t) => {
  const [held, other] = [await openDatabase('postgres'), await openDatabase('postgres')];
  await migrate(held.knex);
  // The held schema's migration takes its lock, then waits on its bookkeeping table.
  const blocker = await held.knex.transaction();
  await blocker.raw('lock table kmg_migrations in access exclusive mode');
  const waiting = migrate(held.knex);
  try {
    const finished = await Promise.race([
      migrate(other.knex).then(() => 'migrated'),
      new Promise((resolve) => setTimeout(resolve, 10_000, 'still waiting after 10 s')),
    ]);
    t.is(finished, 'migrated');
  } finally {
    await blocker.rollback();
    await waiting;
  }
});

/** A second pool on `db`'s schema whose sessions the server ends after `idleMs` idle in a transaction, as the reference server's do. */
function withIdleTimeout(db: TestDatabase, idleMs: number): Knex {
  const connection = db.config.connection as Knex.PgConnectionConfig;
  const knex = knexFactory({ ...db.config, connection: { ...connection, idle_in_transaction_session_timeout: idleMs } });
  databases.push({ ...db, destroy: () => knex.destroy() });
  return knex;
}

withPostgres(test)("postgres: a migration on a busy host is not ended by the pool's idle-in-transaction timeout", async (t) => {
  const knex = withIdleTimeout(await openDatabase('postgres'), 50);
  // The event loop stopped for 200 ms before each of the first statements: the transaction idles that long.
  const stopped = new Int32Array(new SharedArrayBuffer(4));
  let pauses = 4;
  knex.on('query', () => pauses-- > 0 && Atomics.wait(stopped, 0, 0, 200));
  await t.notThrowsAsync(migrate(knex));
});

// Serial: it ends the backend that waits for the migration lock, which must not be one of the
// four-process test's migrations, waiting for its schema's lock at the same moment.
withPostgres(test).serial("postgres: a migration whose connection the server ends fails with the server's reason", async (t) => {
  const db = await openDatabase('postgres');
  const blocker = await db.knex.transaction();
  await blocker.raw('select pg_advisory_xact_lock(?, hashtext(current_schema()))', [0x6b6d6731]);
  const waiting = migrate(db.knex).then(
    () => undefined,
    (err: unknown) => err,
  );
  try {
    // Outside the blocker's transaction, which would see one snapshot of the activity.
    const lockWait = () =>
      db.knex.raw<{ rows: Array<{ pid: number }> }>("select pid from pg_stat_activity where wait_event = 'advisory' and datname = current_database()");
    const { rows } = await until(lockWait, (found) => found.rows.length === 1);
    await db.knex.raw('select pg_terminate_backend(?)', [rows[0]?.pid ?? 0]);
    // 57P01, admin_shutdown: the reason the server sent, not the rollback's "Connection terminated".
    t.like(await waiting, { code: '57P01' });
  } finally {
    await blocker.rollback();
  }
});

// The request log's indexes.

/**
 * The conditions each index scan of `sql`'s plan reads its range by (SQLite's SEARCH details,
 * PostgreSQL's Index Cond of every partition), and whether the plan sorts the records itself. On
 * PostgreSQL, whole-table and bitmap scans (which lose the index's order) are ruled out, as a large
 * table rules them out: a table of a few rows is read whole whatever its indexes.
 */
async function planOf(knex: Knex, sql: string, bindings: readonly Knex.RawBinding[]): Promise<{ ranges: string[]; sorts: boolean }> {
  const query = sql.replaceAll(/\$\d+/g, '?');
  if (knex.client.dialect !== 'postgresql') {
    const details = ((await knex.raw(`explain query plan ${query}`, bindings)) as Array<{ detail: string }>).map((row) => row.detail);
    return { ranges: details.filter((detail) => detail.startsWith('SEARCH')), sorts: details.some((detail) => detail.includes('TEMP B-TREE')) };
  }
  return knex.transaction(async (trx) => {
    await trx.raw('set local enable_seqscan = off; set local enable_bitmapscan = off');
    const { rows } = (await trx.raw(`explain (format json) ${query}`, bindings)) as { rows: Array<{ 'QUERY PLAN': unknown }> };
    const nodes: Array<Record<string, unknown>> = [];
    const visit = (node: Record<string, unknown>) => {
      nodes.push(node);
      for (const child of (node.Plans as Array<Record<string, unknown>> | undefined) ?? []) visit(child);
    };
    visit((rows[0]!['QUERY PLAN'] as Array<{ Plan: Record<string, unknown> }>)[0]?.Plan ?? {});
    return {
      ranges: nodes.filter((node) => node['Index Cond'] !== undefined).map((node) => String(node['Index Cond'])),
      sorts: nodes.some((node) => node['Node Type'] === 'Sort'),
    };
  });
}

for (const [kind, gate] of [
  ['sqlite', test],
  ['postgres', withPostgres(test)],
] as const) {
  gate(`${kind}: the request log reads each filter's records from an index in its order, a later page from where the one before ended`, async (t) => {
    const db = await openDatabase(kind);
    await migrate(db.knex);
    const usage = new KnexUsageStore(db.knex);
    // Another account's many 429s: the planner's statistics make its status index the worse choice for acme's.
    const others = Array.from({ length: 300 }, () => usageRecord({ time: Date.now(), account: 'other', keyId: 'key_b', status: 429 }));
    await usage.insert([usageRecord({ time: Date.now() }), usageRecord({ time: Date.now(), status: 429 }), ...others]);
    await db.knex.raw('analyze');
    const queries: Array<{ sql: string; bindings: readonly Knex.RawBinding[] }> = [];
    db.knex.on('query', ({ sql, bindings }: { sql: string; bindings?: readonly Knex.RawBinding[] }) => queries.push({ sql, bindings: bindings ?? [] }));
    const cursor = `${Date.now()}_9`;
    // The filters and the columns the index range is read by.
    for (const [filter, columns] of [
      [{}, ['time']],
      [{ account: 'acme' }, ['account', 'time']],
      [{ keyId: 'key_a' }, ['key_id', 'time']],
      [{ status: 429 }, ['status', 'time']],
      [{ account: 'acme', status: 429 }, ['account', 'status', 'time']],
    ] as const) {
      queries.length = 0;
      await usage.page(filter, { limit: 10, cursor });
      const [page] = queries;
      const plan = await planOf(db.knex, page?.sql ?? '', page?.bindings ?? []);
      t.false(plan.sorts, `${JSON.stringify(filter)}: in the index's order`);
      // Some: on PostgreSQL the empty default partition's index is the planner's guess.
      const fitting = plan.ranges.some((range) => columns.every((column) => new RegExp(`\\b${column}\\b`).test(range)));
      t.true(fitting, `${JSON.stringify(filter)} read by ${columns.join(', ')}: ${plan.ranges.join(' | ')}`);
    }
  });
}

// Prepared reads.

interface Row {
  id: string;
  name: string;
}

/** A table `things` of two rows, and prepared reads on its database. */
async function things(open: () => Promise<TestDatabase>): Promise<{ knex: Knex; reads: PreparedReads }> {
  const db = await open();
  databases.push(db);
  await db.knex.schema.createTable('things', (t) => {
    t.string('id').primary();
    t.string('name').notNullable();
  });
  await db.knex('things').insert([
    { id: 'a', name: 'first' },
    { id: 'b', name: 'second' },
  ]);
  const reader = preparedReadsOn(db);
  readers.push(reader);
  return { knex: db.knex, reads: reader.reads };
}

const byId = (knex: Knex, reads: PreparedReads) => firstRowReader<[string], Row>(reads, (id: string) => knex<Row>('things').where({ id }).select('id', 'name'));

for (const [name, open, gate] of [
  ['sqlite', sqliteDatabase, test],
  ['postgres', postgresDatabase, withPostgres(test)],
] as const) {
  gate(`${name}: a read written as a Knex query answers one row or nothing, again and again`, async (t) => {
    const { knex, reads } = await things(open);
    const read = byId(knex, reads);
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
    t.deepEqual(await read('b'), { id: 'b', name: 'second' });
    t.is(await read('missing'), undefined);
    t.deepEqual(await Promise.all(['a', 'b', 'a'].map((id) => read(id))), [
      { id: 'a', name: 'first' },
      { id: 'b', name: 'second' },
      { id: 'a', name: 'first' },
    ]);
  });

  gate(`${name}: a column added after the statement was prepared does not break it`, async (t) => {
    const { knex, reads } = await things(open);
    const read = byId(knex, reads);
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
    await knex.schema.alterTable('things', (table) => table.string('colour'));
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
  });
}

test('a read whose arguments are not each exactly one binding is refused when it is made, not when it runs', async (t) => {
  const { knex, reads } = await things(sqliteDatabase);
  t.throws(() => firstRowReader(reads, (id: string) => knex('things').where({ id, name: id }).first('id')), {
    instanceOf: TypeError,
    message: /argument 0 of a prepared read is not one binding/,
  });
  t.throws(() => firstRowReader(reads, (id: string) => knex('things').where({ id: id.toUpperCase() }).first('id')), {
    instanceOf: TypeError,
  });
});

test('sqlite in WAL mode: a prepared read runs beside a transaction in progress and sees only what is committed', async (t) => {
  const wal = () =>
    sqliteDatabase({
      extra: {
        pool: {
          afterCreate(connection: { pragma(source: string): unknown }, done: (err: Error | null, connection: unknown) => void) {
            connection.pragma('journal_mode = WAL');
            done(null, connection);
          },
        },
      },
    });
  const { knex, reads } = await things(wal);
  const read = byId(knex, reads);
  await knex.transaction(async (trx) => {
    await trx('things').insert({ id: 'c', name: 'uncommitted' });
    t.is(await read('c'), undefined);
    t.deepEqual(await read('a'), { id: 'a', name: 'first' });
  });
  t.deepEqual(await read('c'), { id: 'c', name: 'uncommitted' });
});

// The one helper that bounds every Knex store call, whatever the driver returns.

test('a thenable that never settles (as a Knex Transaction or query builder is) fails as unavailable at the bound, its expiry listener called', async (t) => {
  let expired: (() => boolean) | undefined;
  let calls = 0;
  // biome-ignore lint/suspicious/noThenProperty: a thenable is what this test is about
  const never: PromiseLike<string> = { then: () => never as never };
  const call = withinTimeout(20, (isExpired, whenExpired) => {
    expired = isExpired;
    whenExpired(() => calls++);
    return never;
  });
  t.false(expired?.());
  await t.throwsAsync(call, { instanceOf: StoreUnavailableError });
  t.true(expired?.());
  t.is(calls, 1);

  let takenBack = 0;
  await t.throwsAsync(
    withinTimeout(20, (_, whenExpired) => {
      whenExpired(() => takenBack++)();
      return never;
    }),
    { instanceOf: StoreUnavailableError },
  );
  t.is(takenBack, 0, 'a listener taken back is not called');
});

test('a thenable that settles in time gives its value; a synchronous answer needs no timer', async (t) => {
  // biome-ignore lint/suspicious/noThenProperty: a thenable is what this test is about
  const soon: PromiseLike<number> = { then: (resolve) => Promise.resolve(42).then(resolve) };
  t.is(await withinTimeout(60_000, () => soon), 42);
  t.is(await withinTimeout(60_000, () => 'now'), 'now');
});
