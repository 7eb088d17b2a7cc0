import type { Knex } from 'knex';

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
      const postgres = (knex.client as { dialect?: string }).dialect === 'postgresql';
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
];

const migrationSource: Knex.MigrationSource<Migration> = {
  getMigrations: async () => MIGRATIONS,
  getMigrationName: (migration) => migration.name,
  getMigration: async (migration) => migration,
};

const TABLE = 'kmg_migrations';
const LOCK_TABLE = `${TABLE}_lock`;
/** How long a process waits for another one's migration before giving up. */
const LOCK_WAIT_MS = 30_000;

/**
 * Knex makes its bookkeeping tables check-then-create, so processes starting together on a fresh
 * database race: both create a table, or both insert a lock row, after which Knex's lock can never
 * be taken. Made here first, idempotently, with the one lock row under a fixed key.
 */
async function ensureBookkeeping(knex: Knex): Promise<void> {
  if (!(await knex.schema.hasTable(TABLE))) {
    await knex.schema.createTable(TABLE, (table) => {
      table.increments();
      table.string('name');
      table.integer('batch');
      table.timestamp('migration_time');
    });
  }
  if (!(await knex.schema.hasTable(LOCK_TABLE))) {
    await knex.schema.createTable(LOCK_TABLE, (table) => {
      table.increments('index').primary();
      table.integer('is_locked');
    });
  }
  await knex(LOCK_TABLE).insert({ index: 1, is_locked: 0 }).onConflict('index').ignore();
}

// PostgreSQL's unique_violation (its catalog's pg_type row) and duplicate_table; SQLite's message.
const DUPLICATE_CODES = new Set(['23505', '42P07']);
const isDuplicate = (err: unknown) =>
  err instanceof Error && (DUPLICATE_CODES.has(String((err as { code?: unknown }).code)) || err.message.includes('already exists'));

/** Runs `step` again while `racing(err)` says another process is in the way, up to LOCK_WAIT_MS. */
async function retryWhileRacing(step: () => Promise<unknown>, racing: (err: unknown) => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      await step();
      return;
    } catch (err) {
      if (Date.now() > deadline || !(await racing(err))) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 100));
    }
  }
}

/**
 * Brings the database to the latest schema of the Knex stores. Safe to call at every start and
 * from several processes at once: one migrates while the others wait for it.
 * @example await migrate(knex)
 */
export async function migrate(knex: Knex): Promise<void> {
  // A failed create lost a race when it says so, or when the tables are there now (on PostgreSQL
  // the winner's table may still be uncommitted, and invisible, when the loser fails).
  await retryWhileRacing(
    () => ensureBookkeeping(knex),
    async (err) => isDuplicate(err) || ((await knex.schema.hasTable(TABLE)) && (await knex.schema.hasTable(LOCK_TABLE))),
  );
  // Knex does not wait for a lock another process holds: it fails at once.
  await retryWhileRacing(
    () => knex.migrate.latest({ migrationSource, tableName: TABLE }),
    async (err) => err instanceof Error && err.message.includes('Migration table is already locked'),
  );
}
