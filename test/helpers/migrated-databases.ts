import { createHash, randomBytes } from 'node:crypto';
import { constants, existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { threadId } from 'node:worker_threads';
import knexFactory, { type Knex } from 'knex';
import { migrate } from '../../lib/stores/knex/migrations.js';
import type { DatabaseSettings } from '../../reference-server/config.js';
import { asAdmin, POSTGRES_URL } from './services.js';

// Databases the stores' migrations have already run on, for the tests that need a database but are
// not about migrating one: a migration costs SQLite's client 35 ms of CPU, and PostgreSQL with its
// client 170 ms, and the suite needed 550 of them (docs/TESTING.md). Migrating itself is tested where
// it is the subject: knex-plumbing, the CLI's and lifecycle's tests, each on a database of its own.

/** Changes with the migrations' code: a template or a spare schema of other migrations is never used. */
const MIGRATIONS_VERSION = createHash('sha256')
  .update(readFileSync(new URL('../../lib/stores/knex/migrations.js', import.meta.url)))
  .digest('hex')
  .slice(0, 12);

/** A SQLite file the migrations made, copied for each database; made once a version, by whichever test is first. */
const SQLITE_TEMPLATE = join(tmpdir(), `kmg-migrated-${MIGRATIONS_VERSION}.sqlite`);
let sqliteTemplate: Promise<string> | undefined;

async function makeSqliteTemplate(): Promise<string> {
  if (existsSync(SQLITE_TEMPLATE)) return SQLITE_TEMPLATE;
  // Made under a name of its own and renamed: a test of another file copies a whole template or none.
  const draft = `${SQLITE_TEMPLATE}.${process.pid}-${threadId}`;
  const knex = knexFactory({ client: 'better-sqlite3', connection: { filename: draft }, useNullAsDefault: true });
  try {
    await migrate(knex);
  } finally {
    await knex.destroy();
  }
  await rename(draft, SQLITE_TEMPLATE);
  return SQLITE_TEMPLATE;
}

/** Makes `filename` a migrated SQLite database (its directory too); it must not exist yet. */
export async function copyMigratedSqlite(filename: string): Promise<void> {
  const template = await (sqliteTemplate ??= makeSqliteTemplate());
  await mkdir(dirname(filename), { recursive: true });
  await copyFile(template, filename, constants.COPYFILE_EXCL);
}

/**
 * Gives the server `settings` describe a migrated database where it would make a new one: a SQLite
 * file that does not exist yet. PostgreSQL's come migrated from `migratedPostgresSchema`.
 */
export async function seedMigratedDatabase(settings: DatabaseSettings): Promise<void> {
  if (settings.client === 'sqlite' && !existsSync(settings.filename)) await copyMigratedSqlite(settings.filename);
}

const SPARE_PREFIX = 'kmg_spare_';
const spareName = () => `${SPARE_PREFIX}${MIGRATIONS_VERSION}_${randomBytes(6).toString('hex')}`;

/** The tables a migration leaves with rows in them; `emptySchema` puts them back as they were. */
const SEEDED_TABLES = ['kmg_key_version'];

/**
 * A migrated PostgreSQL schema of its own, named `name`: a spare that a test of this run or an
 * earlier one ended with (emptied), or else a new one, migrated. `release` hands it on as a spare,
 * or drops it when it cannot be emptied. Spares of other migrations are dropped.
 */
export async function migratedPostgresSchema(name: string): Promise<{ release(): Promise<void> }> {
  await asAdmin(async (admin) => {
    await (staleSparesDropped ??= dropStaleSpares(admin));
    if (!(await claimSpare(admin, name))) await migrateNewSchema(admin, name);
  });
  return { release: () => asAdmin((admin) => releaseSchema(admin, name)) };
}

let staleSparesDropped: Promise<void> | undefined;

async function dropStaleSpares(admin: Knex): Promise<void> {
  const { rows } = await admin.raw<{ rows: Array<{ nspname: string }> }>(
    'select nspname from pg_namespace where starts_with(nspname, ?) and not starts_with(nspname, ?)',
    [SPARE_PREFIX, `${SPARE_PREFIX}${MIGRATIONS_VERSION}_`],
  );
  // Another file's worker may drop the same spares at once: what it dropped is gone either way.
  for (const { nspname } of rows) await admin.raw('drop schema if exists ?? cascade', [nspname]).catch(() => undefined);
}

/**
 * Renames a spare to `name`. Another test's claim of the same spare may rename it first (then this
 * rename finds no such schema, or, begun at the same moment, a catalog row concurrently updated),
 * and this one tries the next.
 */
async function claimSpare(admin: Knex, name: string): Promise<boolean> {
  const { rows } = await admin.raw<{ rows: Array<{ nspname: string }> }>('select nspname from pg_namespace where starts_with(nspname, ?)', [
    `${SPARE_PREFIX}${MIGRATIONS_VERSION}_`,
  ]);
  for (const { nspname } of rows) {
    try {
      await admin.raw('alter schema ?? rename to ??', [nspname, name]);
      return true;
    } catch {
      // Claimed by another test: the next spare.
    }
  }
  return false;
}

let seedsChecked = false;

async function migrateNewSchema(admin: Knex, name: string): Promise<void> {
  await admin.raw('create schema ??', [name]);
  const knex = knexFactory({ client: 'pg', connection: POSTGRES_URL, searchPath: [name], pool: { min: 0, max: 1 } });
  try {
    await migrate(knex);
  } finally {
    await knex.destroy();
  }
  if (seedsChecked) return;
  seedsChecked = true;
  const seeded = await tablesWithRows(admin, name);
  if (seeded.join() !== SEEDED_TABLES.join()) {
    throw new Error(`the migrations leave rows in ${seeded.join(', ')}: teach emptySchema() to put them back`);
  }
}

async function tablesWithRows(admin: Knex, schema: string): Promise<string[]> {
  const tables = await tablesOf(admin, schema);
  const counted = await Promise.all(tables.map(async (table) => ((await admin.withSchema(schema).from(table).first(admin.raw('1'))) ? [table] : [])));
  return counted.flat();
}

async function tablesOf(admin: Knex, schema: string): Promise<string[]> {
  const { rows } = await admin.raw<{ rows: Array<{ tablename: string }> }>(
    "select tablename from pg_tables where schemaname = ? and tablename not like 'kmg\\_migrations%' order by tablename",
    [schema],
  );
  return rows.map((row) => row.tablename);
}

/**
 * Empties `schema` as its migration left it, in `trx`: deletes, not a truncate (a truncate of the
 * eighteen tables costs the server 40 ms of CPU and a quarter of a second, the deletes of a test's
 * few rows 2 ms). A lock a test left behind fails it rather than waiting.
 */
export async function emptySchema(trx: Knex.Transaction, schema: string): Promise<void> {
  await trx.raw("set local lock_timeout = '2s'");
  for (const table of await tablesOf(trx, schema)) {
    if (table === 'kmg_key_version') await trx.withSchema(schema).table(table).update({ version: 0 });
    else await trx.withSchema(schema).table(table).delete();
  }
}

/** Empties the schema and renames it a spare, in one transaction; drops it when that fails. */
async function releaseSchema(admin: Knex, name: string): Promise<void> {
  try {
    await admin.transaction(async (trx) => {
      await emptySchema(trx, name);
      await trx.raw('alter schema ?? rename to ??', [name, spareName()]);
    });
  } catch {
    await admin.raw('drop schema if exists ?? cascade', [name]);
  }
}
