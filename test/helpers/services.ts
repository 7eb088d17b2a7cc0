import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecutionContext, TestFn } from 'ava';
import knexFactory, { type Knex } from 'knex';
import { Redis } from 'ioredis';

/**
 * Real services for the tests. Elsewhere than CI, a test file whose service is unreachable
 * skips with one line saying how to point it at one; with CI=true the file fails instead.
 */
export const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const IN_CI = process.env.CI === 'true' || process.env.CI === '1';

async function reachable(probe: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await probe();
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const postgresDown = await reachable(async () => {
  const knex = knexFactory({ client: 'pg', connection: { connectionString: POSTGRES_URL, connectionTimeoutMillis: 2000 } });
  try {
    await knex.raw('select 1');
  } finally {
    await knex.destroy();
  }
});

const redisDown = await reachable(async () => {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
  } finally {
    redis.disconnect();
  }
});

// Stands in for `test` when a service is down: every property and every call is a no-op.
const absent: unknown = new Proxy(() => undefined, { get: () => absent });

// Each test file runs in a process of its own: a missing dependency is announced once per file.
const announced = new Set<string>();

/**
 * `test` when nothing is `missing`; else one skipped line saying what is missing and the `hint`
 * (a failure under CI) and a no-op stand-in.
 */
export function gate<T>(test: TestFn<T>, what: string, missing: string | undefined, hint: string): TestFn<T> {
  if (missing === undefined) return test;
  if (announced.has(what)) return absent as TestFn<T>;
  announced.add(what);
  if (IN_CI) {
    test(`${what} is available`, (t) => t.fail(`${what} missing in CI: ${missing}`));
  } else {
    // One line in the report, and the file still declares a test, as AVA requires.
    const skipped = test.skip;
    skipped(`${what} tests skipped: ${missing} (${hint})`, () => undefined);
  }
  return absent as TestFn<T>;
}

/** `test`, or a no-op stand-in (after one line saying why) when PostgreSQL is not reachable. */
export function withPostgres<T>(test: TestFn<T>): TestFn<T> {
  return gate(test, 'PostgreSQL', postgresDown && `nothing answers at ${POSTGRES_URL}`, 'set TEST_DATABASE_URL to point at one');
}

/**
 * `test` with at most `limit` of its tests running at a time, the others waiting their turn. AVA
 * starts every test of a file at once: in a file whose tests each open a pool of their own, this
 * bounds the connections the file holds (docs/TESTING.md counts them).
 */
export function fewAtOnce<T>(test: TestFn<T>, limit: number): TestFn<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  const limited = (title: string, run: (t: ExecutionContext<T>) => unknown) =>
    test(title, async (t) => {
      while (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
      running += 1;
      try {
        return await run(t);
      } finally {
        running -= 1;
        waiting.shift()?.();
      }
    });
  return limited as unknown as TestFn<T>;
}

/** `test`, or a no-op stand-in (after one line saying why) when Redis is not reachable. */
export function withRedis<T>(test: TestFn<T>): TestFn<T> {
  return gate(test, 'Redis', redisDown && `nothing answers at ${REDIS_URL}`, 'set TEST_REDIS_URL to point at one');
}

/** `test`, or a no-op stand-in (after one line saying why) when `program` is not on PATH. */
export async function withProgram<T>(test: TestFn<T>, program: string): Promise<TestFn<T>> {
  const found = await new Promise<boolean>((resolve) => {
    const probe = spawn(program, ['--version'], { stdio: 'ignore' });
    probe.once('error', () => resolve(false));
    probe.once('exit', (code) => resolve(code === 0));
  });
  return gate(test, program, found ? undefined : 'not found on PATH', `install ${program} to run them`);
}

/** Debian's Chromium, which the browser tests drive through playwright-core. */
export const CHROMIUM = '/usr/bin/chromium';

/** `test`, or a no-op stand-in (after one line saying why) when Debian's Chromium is not installed. */
export function withChromium<T>(test: TestFn<T>): TestFn<T> {
  return gate(test, 'Chromium', existsSync(CHROMIUM) ? undefined : `${CHROMIUM} not found`, 'apt-get install -y chromium to run them');
}

export interface TestDatabase {
  knex: Knex;
  /** Knex connection settings for another pool on the same data (a second server process). */
  config: Knex.Config;
  destroy(): Promise<void>;
}

/** A PostgreSQL schema of its own, so test files can run in parallel; dropped by `destroy`. */
export async function postgresDatabase(): Promise<TestDatabase> {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  await asAdmin((admin) => admin.raw('create schema ??', [schema]));
  // A file's tests each open a pool, all kept until the file ends: few connections each, closed
  // after a second idle, so that parallel files stay far below the server's max_connections.
  // Commits that do not wait for the disk: a test's rows need not survive a crash of the server.
  const connection = { connectionString: POSTGRES_URL, options: '-c synchronous_commit=off' };
  const config: Knex.Config = { client: 'pg', connection, searchPath: [schema], pool: { min: 0, max: 4, idleTimeoutMillis: 1000 } };
  const knex = knexFactory(config);
  return {
    knex,
    config,
    async destroy() {
      await knex.destroy();
      await asAdmin((admin) => admin.raw('drop schema ?? cascade', [schema]));
    },
  };
}

/** Statements on a connection of its own as the test server's superuser, one after the other, closed at once. */
export async function asAdmin(use: (admin: Knex) => Promise<unknown>): Promise<void> {
  const admin = knexFactory({ client: 'pg', connection: POSTGRES_URL, pool: { min: 0, max: 1 } });
  try {
    await use(admin);
  } finally {
    await admin.destroy();
  }
}

/**
 * A SQLite file in a temp directory of its own, with Knex settings `extra` (e.g. a pool); `prepare`
 * makes the file first (migrated-databases.ts's copy of a migrated one); removed by `destroy`.
 */
export async function sqliteDatabase({
  extra = {},
  prepare,
}: {
  extra?: Partial<Knex.Config>;
  prepare?: (filename: string) => Promise<void>;
} = {}): Promise<TestDatabase> {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-sqlite-'));
  const filename = join(dir, 'test.db');
  await prepare?.(filename);
  const config: Knex.Config = { ...extra, client: 'better-sqlite3', connection: { filename }, useNullAsDefault: true };
  const knex = knexFactory(config);
  return {
    knex,
    config,
    async destroy() {
      await knex.destroy();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
