import type { Knex } from 'knex';
import { partitionUsage, unpartitionUsage } from './usage-partitions.js';

type Migration = Knex.Migration & { name: string };

/** Every table of the gateway, in order. Kept in code so the migrations ship inside dist/. */
const MIGRATIONS: Migration[] = [
  {
    name: '001_api_keys',
    async up(knex) {
      await knex.schema.createTable('kmg_api_keys', (table) => {
        table.increments('seq').primary(); // creation order
        table.string('id', 64).notNullable().unique();
        table.string('account', 255).notNullable().index();
        table.string('hash', 64).notNullable().unique();
        table.text('scopes').notNullable(); // JSON array
        table.text('models'); // JSON array, null: every model
        table.bigInteger('created_at').notNullable();
        table.bigInteger('expires_at');
        table.bigInteger('revoked_at');
      });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_api_keys');
    },
  },
  {
    name: '002_files',
    async up(knex) {
      // List cursors compare ids byte by byte: PostgreSQL must sort them in the "C" collation
      // (SQLite's default BINARY collation already does).
      const postgres = knex.client.dialect === 'postgresql';
      await knex.schema.createTable('kmg_files', (table) => {
        if (postgres) table.specificType('id', 'varchar(37) collate "C"').primary();
        else table.string('id', 37).primary();
        table.string('account', 255).notNullable();
        table.string('filename', 255).notNullable();
        table.bigInteger('bytes').notNullable();
        table.bigInteger('created_at').notNullable();
        table.bigInteger('expires_at');
        table.index(['account', 'id']); // list pages, usage
        table.index(['expires_at']); // the expiry sweep
      });
      // One row per account that ever created a file: creations lock it, one at a time per account.
      await knex.schema.createTable('kmg_file_accounts', (table) => {
        table.string('account', 255).primary();
      });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_file_accounts');
      await knex.schema.dropTable('kmg_files');
    },
  },
  {
    // A key's own limits on model calls; null: the deployment's default.
    name: '003_key_limits',
    async up(knex) {
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.bigInteger('limit_requests_per_minute');
        table.bigInteger('limit_tokens_per_minute');
        table.bigInteger('limit_tokens_per_day');
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.dropColumns('limit_requests_per_minute', 'limit_tokens_per_minute', 'limit_tokens_per_day');
      });
    },
  },
  {
    // One row per model call (KnexUsageStore), written in batches, read by the usage reports.
    name: '004_usage',
    async up(knex) {
      await knex.schema.createTable('kmg_usage', (table) => {
        table.bigIncrements('seq').primary(); // insertion order
        table.bigInteger('time').notNullable(); // Unix ms
        table.string('day', 10).notNullable(); // UTC date of `time`, for grouping
        table.string('request_id', 64).notNullable();
        table.string('key_id', 64).notNullable();
        table.string('account', 255).notNullable();
        table.string('endpoint', 255).notNullable();
        table.string('model', 255);
        table.string('provider', 255);
        table.integer('status').notNullable();
        table.boolean('stream').notNullable();
        table.bigInteger('input_tokens').notNullable();
        table.bigInteger('output_tokens').notNullable();
        table.integer('attachments').notNullable();
        table.double('latency_ms').notNullable();
        table.double('upstream_first_byte_ms');
        table.double('upstream_ms');
        table.index(['account', 'time']);
        table.index(['key_id', 'time']);
        table.index(['time']);
      });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_usage');
    },
  },
  {
    name: '005_admin_tokens_and_sessions',
    async up(knex) {
      // Apart from kmg_api_keys: a lookup by hash in one table can never find a credential of the other kind.
      await knex.schema.createTable('kmg_admin_tokens', (table) => {
        table.increments('seq').primary(); // creation order
        table.string('id', 64).notNullable().unique();
        table.string('hash', 64).notNullable().unique();
        table.string('name', 255);
        table.bigInteger('created_at').notNullable();
        table.bigInteger('revoked_at');
      });
      await knex.schema.createTable('kmg_admin_sessions', (table) => {
        table.string('hash', 64).primary(); // SHA-256 of the cookie's value
        table.string('token_id', 64).notNullable().index();
        table.string('csrf_token', 64).notNullable();
        table.bigInteger('created_at').notNullable();
        table.bigInteger('expires_at').notNullable().index();
      });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_admin_sessions');
      await knex.schema.dropTable('kmg_admin_tokens');
    },
  },
  {
    name: '006_key_version',
    async up(knex) {
      // One row, counted up at every revocation or change of a key: what KnexKeyChanges polls.
      await knex.schema.createTable('kmg_key_version', (table) => {
        table.integer('id').primary();
        table.bigInteger('version').notNullable();
      });
      await knex('kmg_key_version').insert({ id: 1, version: 0 });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_key_version');
    },
  },
  {
    name: '20261125_rotation_replaced_by',
    async up(knex) {
      // The key's replacement, set once by a rotation: only a key without one can be rotated.
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.string('replaced_by', 64);
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.dropColumn('replaced_by');
      });
    },
  },
  {
    name: 'cost_and_budgets',
    async up(knex) {
      // Picodollars (10⁻¹² USD), exact: a call's tokens at its model's price.
      await knex.schema.alterTable('kmg_usage', (table) => {
        table.bigInteger('cost_picousd').notNullable().defaultTo(0);
      });
      // USD, as configured; null: the deployment's default.
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.double('limit_cost_per_day');
        table.double('limit_cost_per_month');
      });
      // An account's budgets, over all its keys; a row only for an account that has one.
      await knex.schema.createTable('kmg_account_budgets', (table) => {
        table.string('account', 255).primary();
        table.double('cost_per_day');
        table.double('cost_per_month');
      });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_account_budgets');
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.dropColumns('limit_cost_per_day', 'limit_cost_per_month');
      });
      await knex.schema.alterTable('kmg_usage', (table) => {
        table.dropColumn('cost_picousd');
      });
    },
  },
  {
    name: '20261125_keys_name_hint_links_last_used',
    async up(knex) {
      // What tells keys apart: a name, the secret's last four characters, the key a rotation
      // replaced, and when the key was last used (written at most once a minute).
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.string('name', 100);
        table.string('hint', 4);
        table.string('replaces', 64);
        table.bigInteger('last_used_at');
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.dropColumns('name', 'hint', 'replaces', 'last_used_at');
      });
    },
  },
  {
    // The admin actions (KnexAuditStore), appended, never changed; never a secret in them.
    name: '20261125_audit_log',
    async up(knex) {
      await knex.schema.createTable('kmg_audit_log', (table) => {
        table.bigIncrements('seq').primary(); // order of appending: the list's cursor
        table.string('id', 64).notNullable().unique();
        table.bigInteger('at').notNullable(); // Unix seconds
        table.string('action', 64).notNullable();
        table.string('actor_type', 16).notNullable(); // admin_token | cli
        table.string('actor_id', 64);
        table.string('actor_name', 255);
        table.string('key_id', 64);
        table.string('account', 255);
        table.string('token_id', 64);
        table.string('replacement_id', 64);
        table.text('fields').notNullable(); // JSON array of field names
        table.string('address', 64);
        table.index(['at']);
        table.index(['key_id']);
        table.index(['account']);
      });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_audit_log');
    },
  },
  {
    name: '20261125_routing_attempts',
    async up(knex) {
      // What answered a routed call: the upstream model of the provider, and the attempts it took.
      await knex.schema.alterTable('kmg_usage', (table) => {
        table.string('upstream_model', 255);
        table.integer('attempts').notNullable().defaultTo(0);
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_usage', (table) => {
        table.dropColumns('upstream_model', 'attempts');
      });
    },
  },
  {
    name: '20261206_keys_original_id',
    async up(knex) {
      // The first key of a replacement's rotations: the one whose budget they all spend against.
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.string('original_id', 64);
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.dropColumn('original_id');
      });
    },
  },
  {
    name: '20261206_admin_users',
    async up(knex) {
      // The dashboard's people (OIDC sign-in) and their sessions: a session belongs to an admin
      // token or to a user; last_seen_at is what the idle timeout counts from.
      await knex.schema.createTable('kmg_admin_users', (table) => {
        table.bigIncrements('seq').primary(); // order of first sign-in
        table.string('id', 64).notNullable().unique();
        table.string('issuer', 512).notNullable();
        table.string('subject', 255).notNullable();
        table.string('email', 320);
        table.string('name', 255);
        table.string('role', 16); // assigned by an admin
        table.string('claim_role', 16); // from the provider's claim at the last sign-in
        table.boolean('disabled').notNullable().defaultTo(false);
        table.bigInteger('created_at').notNullable();
        table.bigInteger('last_sign_in_at').notNullable();
        table.unique(['issuer', 'subject']);
      });
      await knex.schema.alterTable('kmg_admin_sessions', (table) => {
        table.setNullable('token_id');
        table.string('user_id', 64).index();
        table.bigInteger('last_seen_at');
      });
      await knex.schema.alterTable('kmg_audit_log', (table) => {
        table.string('user_id', 64); // the person acted on (user.*)
        table.text('changes'); // JSON: { field: { from, to } }
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_audit_log', (table) => {
        table.dropColumns('user_id', 'changes');
      });
      await knex('kmg_admin_sessions').whereNull('token_id').delete();
      await knex.schema.alterTable('kmg_admin_sessions', (table) => {
        table.dropColumns('user_id', 'last_seen_at');
        table.dropNullable('token_id');
      });
      await knex.schema.dropTable('kmg_admin_users');
    },
  },
  {
    name: '20261206_mcp',
    async up(knex) {
      // A key's MCP grant: a JSON array of globs over {server}/{tool}; null: none.
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.text('mcp_tools');
      });
      // An account's MCP grant (KnexMcpGrantStore): a key's grant is the intersection with it.
      await knex.schema.createTable('kmg_mcp_account_grants', (table) => {
        table.string('account', 255).primary();
        table.text('tools').notNullable(); // JSON array of globs
      });
      // One row per MCP tools/call (KnexMcpCallStore): usage, not an audit row.
      await knex.schema.createTable('kmg_mcp_calls', (table) => {
        table.bigIncrements('seq').primary();
        table.bigInteger('time').notNullable(); // Unix ms
        table.string('request_id', 64).notNullable();
        table.string('key_id', 64).notNullable();
        table.string('account', 255).notNullable();
        table.string('server', 64).notNullable();
        table.string('tool', 128).notNullable();
        table.string('outcome', 16).notNullable();
        table.integer('duration_ms').notNullable();
        table.bigInteger('request_bytes').notNullable();
        table.bigInteger('response_bytes').notNullable();
        table.index(['account', 'time']);
        table.index(['key_id', 'time']);
        table.index(['time']);
      });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_mcp_calls');
      await knex.schema.dropTable('kmg_mcp_account_grants');
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.dropColumn('mcp_tools');
      });
    },
  },
  {
    name: '20261206_response_cache',
    async up(knex) {
      // A call answered from the response cache, and what its answer cost when it was made; a
      // key's own caching (its time to live, and whether its entries are its own).
      await knex.schema.alterTable('kmg_usage', (table) => {
        table.string('cache', 8);
        table.bigInteger('cost_saved_picousd').notNullable().defaultTo(0);
      });
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.integer('cache_ttl_seconds');
        table.boolean('cache_per_key').notNullable().defaultTo(false);
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_usage', (table) => {
        table.dropColumns('cache', 'cost_saved_picousd');
      });
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.dropColumns('cache_ttl_seconds', 'cache_per_key');
      });
    },
  },
  {
    // Usage per (hour, account, key, model, endpoint, status) and per day: what the reports read,
    // kept by a trigger in the transaction of every insert into kmg_usage, and back-filled here.
    name: '20261207_usage_rollups',
    async up(knex) {
      for (const [table, period] of [
        ['kmg_usage_hourly', 'hour'],
        ['kmg_usage_daily', 'day'],
      ] as const) {
        await knex.schema.createTable(table, (columns) => {
          if (period === 'hour') columns.bigInteger('hour').notNullable(); // Unix ms of the UTC hour
          columns.string('day', 10).notNullable(); // UTC date
          columns.string('account', 255).notNullable();
          columns.string('key_id', 64).notNullable();
          columns.string('model', 255).notNullable(); // '': the calls without a model (a key column cannot be null)
          columns.string('endpoint', 255).notNullable();
          columns.integer('status').notNullable();
          columns.bigInteger('requests').notNullable();
          columns.bigInteger('input_tokens').notNullable();
          columns.bigInteger('output_tokens').notNullable();
          columns.bigInteger('cost_picousd').notNullable();
          columns.bigInteger('cache_hits').notNullable(); // the calls answered from the response cache
          columns.bigInteger('cost_saved_picousd').notNullable();
          columns.primary(ROLLUP_KEY[table]);
          columns.index(['account', period]);
          columns.index(['key_id', period]);
        });
      }
      const postgres = knex.client.dialect === 'postgresql';
      for (const statement of postgres ? POSTGRES_ROLLUP_TRIGGER : SQLITE_ROLLUP_TRIGGER) await knex.raw(statement);
      await knex.raw(rollUp('kmg_usage_hourly', 'kmg_usage', postgres));
      await knex.raw(rollUp('kmg_usage_daily', 'kmg_usage', postgres));
    },
    async down(knex) {
      if (knex.client.dialect === 'postgresql') {
        await knex.raw('drop trigger kmg_usage_roll_up on kmg_usage');
        await knex.raw('drop function kmg_usage_roll_up()');
      } else {
        await knex.raw('drop trigger kmg_usage_roll_up');
      }
      await knex.schema.dropTable('kmg_usage_daily');
      await knex.schema.dropTable('kmg_usage_hourly');
    },
  },
  {
    name: '20261207_usage_trace_id',
    async up(knex) {
      // The request log links a call to the operator's tracing backend.
      await knex.schema.alterTable('kmg_usage', (table) => {
        table.string('trace_id', 32);
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_usage', (table) => {
        table.dropColumn('trace_id');
      });
    },
  },
  {
    name: '20261207_soft_budgets_alert_thresholds',
    async up(knex) {
      // A budget may be soft (it alerts and never refuses) and name its own alert thresholds (a JSON array of percents).
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        // Null: the deployment's default (its modelLimits), as every limit of a key.
        table.boolean('limit_cost_soft');
        table.text('limit_cost_alert_thresholds');
      });
      await knex.schema.alterTable('kmg_account_budgets', (table) => {
        table.boolean('cost_soft').notNullable().defaultTo(false);
        table.text('cost_alert_thresholds');
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_api_keys', (table) => {
        table.dropColumns('limit_cost_soft', 'limit_cost_alert_thresholds');
      });
      await knex.schema.alterTable('kmg_account_budgets', (table) => {
        table.dropColumns('cost_soft', 'cost_alert_thresholds');
      });
    },
  },
  {
    name: '20261207_session_oidc_sid',
    async up(knex) {
      // The provider's session a dashboard session was opened under: its logout (back- or front-channel) names it.
      await knex.schema.alterTable('kmg_admin_sessions', (table) => {
        table.string('oidc_sid', 255).index();
      });
    },
    async down(knex) {
      await knex.schema.alterTable('kmg_admin_sessions', (table) => {
        table.dropColumn('oidc_sid');
      });
    },
  },
  {
    // PostgreSQL: the records partitioned by UTC day, so that retention drops a day whole
    // (usage-partitions.ts); the records there are carried over. SQLite keeps one table.
    name: '20261207_usage_partitions',
    async up(knex) {
      if (knex.client.dialect !== 'postgresql') return;
      await partitionUsage(knex, Date.now());
      await knex.raw(POSTGRES_ROLLUP_TRIGGER[1] as string);
    },
    async down(knex) {
      if (knex.client.dialect !== 'postgresql') return;
      await unpartitionUsage(knex);
      await knex.raw(POSTGRES_ROLLUP_TRIGGER[1] as string);
    },
  },
  {
    // The request log filtered by status, with or without an account, read newest first in the
    // index's order: a status an account never had is found absent at once, not by reading all
    // its records. SQLite's indexes end with the rowid (`seq`) already; PostgreSQL's name it, the
    // account's and the key's made again with it, so that their order is the log's too. Made on
    // the parent: on every day partition.
    name: '20261207_usage_request_log_indexes',
    async up(knex) {
      const postgres = knex.client.dialect === 'postgresql';
      if (postgres) for (const [name] of ORDERED_BY_TIME) await knex.raw(`drop index ${name}`);
      for (const [name, columns] of [...(postgres ? ORDERED_BY_TIME : []), ...BY_STATUS]) {
        await knex.raw(`create index ${name} on kmg_usage (${columns}${postgres ? ', seq' : ''})`);
      }
    },
    async down(knex) {
      for (const [name] of BY_STATUS) await knex.raw(`drop index ${name}`);
      if (knex.client.dialect !== 'postgresql') return;
      for (const [name, columns] of ORDERED_BY_TIME) await knex.raw(`drop index ${name}; create index ${name} on kmg_usage (${columns})`);
    },
  },
];

/** The request log's indexes on kmg_usage, by name and leading columns: those made before its migration, and those it adds. */
const ORDERED_BY_TIME = [
  ['kmg_usage_account_time_index', 'account, time'],
  ['kmg_usage_key_id_time_index', 'key_id, time'],
] as const;
const BY_STATUS = [
  ['kmg_usage_account_status_time_index', 'account, status, time'],
  ['kmg_usage_status_time_index', 'status, time'],
] as const;

type RollupTable = 'kmg_usage_hourly' | 'kmg_usage_daily';

const ROLLUP_SUMS = ['requests', 'input_tokens', 'output_tokens', 'cost_picousd', 'cache_hits', 'cost_saved_picousd'];
const ROLLUP_GROUP = ['account', 'key_id', 'model', 'endpoint', 'status'];
/** A roll-up row's key (its primary key), and the columns it is written with. */
const ROLLUP_KEY: Record<RollupTable, string[]> = { kmg_usage_hourly: ['hour', ...ROLLUP_GROUP], kmg_usage_daily: ['day', ...ROLLUP_GROUP] };
const ROLLUP_COLUMNS: Record<RollupTable, string[]> = {
  kmg_usage_hourly: ['hour', 'day', ...ROLLUP_GROUP, ...ROLLUP_SUMS],
  kmg_usage_daily: ['day', ...ROLLUP_GROUP, ...ROLLUP_SUMS],
};

/**
 * Adds the records of `from` (kmg_usage's columns) to the roll-up `table`, in the key's order (two
 * writers lock the rows they share in the same order: no deadlock).
 */
function rollUp(table: RollupTable, from: string, postgres: boolean): string {
  const values: Record<string, string> = {
    hour: 'time - time % 3600000',
    model: "coalesce(model, '')",
    requests: 'count(*)',
    input_tokens: 'sum(input_tokens)',
    output_tokens: 'sum(output_tokens)',
    cost_picousd: 'sum(cost_picousd)',
    cache_hits: "sum(case when cache = 'hit' then 1 else 0 end)",
    cost_saved_picousd: 'sum(cost_saved_picousd)',
  };
  const columns = ROLLUP_COLUMNS[table];
  const select = columns.map((column) => values[column] ?? column).join(', ');
  const groups = columns
    .slice(0, -ROLLUP_SUMS.length)
    .map((_, index) => index + 1)
    .join(', ');
  const add = ROLLUP_SUMS.map((column) => `${column} = ${table}.${column} + excluded.${column}`).join(', ');
  // SQLite reads "select … on conflict" as a join without "where true".
  return `insert into ${table} (${columns.join(', ')}) select ${select} from ${from} ${postgres ? '' : 'where true '}group by ${groups} order by ${groups} on conflict (${ROLLUP_KEY[table].join(', ')}) do update set ${add}`;
}

// PostgreSQL: once per statement, over its rows (a transition table): one upsert per roll-up row a batch touches.
const POSTGRES_ROLLUP_TRIGGER = [
  `create function kmg_usage_roll_up() returns trigger language plpgsql as $$ begin
  ${rollUp('kmg_usage_hourly', 'inserted', true)};
  ${rollUp('kmg_usage_daily', 'inserted', true)};
  return null;
end $$`,
  'create trigger kmg_usage_roll_up after insert on kmg_usage referencing new table as inserted for each statement execute function kmg_usage_roll_up()',
];

// SQLite has no statement triggers: once per row, an upsert of one row in each roll-up.
const SQLITE_ROLLUP_TRIGGER = [
  `create trigger kmg_usage_roll_up after insert on kmg_usage begin
  ${rollUpRow('kmg_usage_hourly')};
  ${rollUpRow('kmg_usage_daily')};
end`,
];

function rollUpRow(table: RollupTable): string {
  const values: Record<string, string> = {
    hour: 'new.time - new.time % 3600000',
    model: "coalesce(new.model, '')",
    requests: '1',
    cache_hits: "case when new.cache = 'hit' then 1 else 0 end",
  };
  const columns = ROLLUP_COLUMNS[table];
  const row = columns.map((column) => values[column] ?? `new.${column}`).join(', ');
  const add = ROLLUP_SUMS.map((column) => `${column} = ${column} + excluded.${column}`).join(', ');
  return `insert into ${table} (${columns.join(', ')}) values (${row}) on conflict (${ROLLUP_KEY[table].join(', ')}) do update set ${add}`;
}

const migrationSource: Knex.MigrationSource<Migration> = {
  getMigrations: async () => MIGRATIONS,
  getMigrationName: (migration) => migration.name,
  getMigration: async (migration) => migration,
};

const TABLE = 'kmg_migrations';
/** 'kmg1': the PostgreSQL advisory lock key of these migrations, and SQLite's `application_id` of the file. */
const GATEWAY_ID = 0x6b6d6731;

/**
 * Holds the migration lock for the rest of `trx`, waiting for a process that holds it. Knex's own
 * lock fails at once when taken, and its bookkeeping tables are made check-then-create, so
 * processes migrating a fresh database together would race. PostgreSQL: a transaction-level
 * advisory lock of the schema. SQLite: the database's write lock, taken by a first statement that writes (the
 * file's `application_id`, the same every time), which waits out another writer for the busy
 * timeout.
 */
async function lockMigrations(trx: Knex.Transaction): Promise<void> {
  if (trx.client.dialect === 'postgresql') {
    // Keyed by the schema too: deployments in other schemas of the database migrate undisturbed.
    await trx.raw('select pg_advisory_xact_lock(?, hashtext(current_schema()))', [GATEWAY_ID]);
  } else {
    await trx.raw(`pragma application_id = ${GATEWAY_ID}`);
  }
}

/**
 * Brings the database to the latest schema of the Knex stores, through Knex's migrator with the
 * migrations in code. Safe to call at every start and from several processes at once: one
 * migrates while the others wait for it, then find nothing left to do.
 * @example await migrate(knex)
 */
export async function migrate(knex: Knex): Promise<void> {
  const client = knex.client as Knex.Client;
  const connection = (await client.acquireConnection()) as unknown;
  // Migrations are not requests: none of the pool's timeouts on their session, for the lock's wait
  // nor for the pauses between statements, which a busy host stretches past a request's bound. Set
  // before the transaction begins: the pause after BEGIN counts too.
  const session = client.dialect === 'postgresql' ? (connection as { query(sql: string): Promise<unknown> }) : undefined;
  let failure: unknown;
  try {
    await session?.query('set statement_timeout = 0; set idle_in_transaction_session_timeout = 0');
    await knex.transaction(
      async (trx) => {
        try {
          await lockMigrations(trx);
          await trx.migrate.latest({ migrationSource, tableName: TABLE });
        } catch (err) {
          failure = err;
          throw err;
        }
      },
      { connection },
    );
    await session?.query('reset statement_timeout; reset idle_in_transaction_session_timeout');
  } catch (err) {
    await client.destroyRawConnection(connection).catch(() => undefined);
    // On a connection the server ended, the rollback fails too ("Connection terminated
    // unexpectedly"), and Knex rejects with that: the migration's own failure says why.
    throw failure ?? err;
  } finally {
    await client.releaseConnection(connection);
  }
}
