import test, { type ExecutionContext } from 'ava';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { toGatewayError } from '../../lib/errors/to-gateway-error.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { KnexKeyChanges } from '../../lib/stores/knex/key-changes.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { openMigratedDatabase, type Database } from '../../reference-server/database.js';
import { filesApp, type FilesApp } from '../helpers/files-app.js';
import { pdfOf, uploadForm } from '../helpers/multipart.js';
import { until } from '../helpers/poll.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { tcpProxy, type TcpProxy } from '../helpers/server-tcp-proxy.js';
import { POSTGRES_URL, withPostgres } from '../helpers/services.js';

/** The bound of every store call here: short, so that the stall costs little, and far above a query's time on a busy machine. */
const BOUND_MS = 2000;
/**
 * What a request may take beyond the bound on a shared, busy machine. The stall lasts until the
 * test ends it: an answer at all while it lasts shows that nothing waited for the database.
 */
const SLACK_MS = 4 * BOUND_MS;
/** The bound where a fault must be answered at once: an answer far before it waited for nothing. */
const LONG_BOUND_MS = 30_000;

/**
 * Runs `closes` when the test ends, the last first, a failure ignored: a test's pools, proxies and
 * databases go with it, not when the file ends (docs/TESTING.md counts the connections).
 */
const closeAtEnd = (t: ExecutionContext, ...closes: Array<() => Promise<unknown>>) => {
  for (const close of closes) t.teardown(() => close().catch(() => undefined));
};

const postgres = new URL(POSTGRES_URL);
const startProxy = () => tcpProxy({ host: postgres.hostname, port: Number(postgres.port || 5432) });

const through = (url: string, proxy: TcpProxy) => {
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  return proxied.toString();
};

interface Answer {
  status: number;
  code: string | undefined;
  ms: number;
}

async function timed(send: () => Promise<Response>): Promise<Answer> {
  const started = performance.now();
  const response = await send();
  const body = (await response.json()) as { error?: { code: string } };
  return { status: response.status, code: body.error?.code, ms: performance.now() - started };
}

/** The requests of these tests, as account a of `app`. */
const requests = (app: FilesApp) => {
  const auth = { authorization: `Bearer ${app.keys.a}` };
  return {
    upload: () => timed(() => fetch(`${app.url}/v1/files`, { method: 'POST', headers: auth, body: uploadForm(pdfOf(1000)) })),
    retrieve: (id: string) => timed(() => fetch(`${app.url}/v1/files/${id}`, { headers: auth })),
    list: () => timed(() => fetch(`${app.url}/v1/files`, { headers: auth })),
    ids: async () => {
      const response = await fetch(`${app.url}/v1/files`, { headers: auth });
      return ((await response.json()) as { data: Array<{ id: string }> }).data.map((file) => file.id);
    },
  };
};

interface Faulty {
  app: FilesApp;
  send: ReturnType<typeof requests>;
  /** A file of account a, uploaded while all was well. */
  id: string;
  proxy: TcpProxy;
  database: Database;
  /** On the app's database, straight to PostgreSQL: takes locks and terminates the app's backends. */
  direct: Knex;
  /** Runs `sql` on the server's maintenance database (the test database), for what concerns the app's whole database. */
  server(sql: string): Promise<unknown>;
  name: string;
}

/**
 * The files API in this process (lib's filesRouter, keys in memory) on a KnexFileStore opened by
 * the reference server's `openMigratedDatabase`, on a database of its own reached through a proxy
 * the test controls; one file uploaded.
 */
async function faultyApp(t: ExecutionContext, boundMs = BOUND_MS): Promise<Faulty> {
  const throwaway = await throwawayPostgres({ ownDatabase: true });
  closeAtEnd(t, throwaway.drop);
  const proxy = await startProxy();
  closeAtEnd(t, proxy.close);
  const database = await openMigratedDatabase(
    { client: 'pg', connectionString: through(throwaway.url, proxy), display: 'test' },
    { timeoutMs: boundMs, poolMax: 4 },
  );
  // Closed in reverse: the proxy first, so that no connection stalls the pool's end.
  closeAtEnd(t, database.close, proxy.close);
  const app = await filesApp({ files: new KnexFileStore(database.knex, database.storeOptions) });
  closeAtEnd(t, app.close);
  const direct = knexFactory({ client: 'pg', connection: throwaway.url, pool: { min: 0, max: 2 } });
  const admin = knexFactory({ client: 'pg', connection: POSTGRES_URL, pool: { min: 0, max: 1 } });
  closeAtEnd(
    t,
    () => direct.destroy(),
    () => admin.destroy(),
  );
  const send = requests(app);
  // The setup, not the subject: on a loaded machine the first upload may pass the short bound, so it is asked again.
  const uploaded = await until(
    () => send.upload().then((response) => response.status),
    (status) => status === 200,
    { intervalMs: 200, attempts: 10 },
  );
  if (uploaded !== 200) throw new Error('the upload before the fault failed');
  const [id] = await send.ids();
  if (id === undefined) throw new Error('the file uploaded before the fault is not listed');
  return { app, send, id, proxy, database, direct, server: (sql) => admin.raw(sql), name: new URL(throwaway.url).pathname.slice(1) };
}

const UNAVAILABLE = { status: 503, code: 'service_unavailable' };

/** The app's backends on its database (every one but `direct`'s own). */
const appBackends = (f: Faulty) =>
  f.direct.raw<{ rows: Array<{ pid: number; wait_event_type: string | null; state: string | null }> }>(
    'select pid, wait_event_type, state from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
  );

const gate = withPostgres(test);

/**
 * Retrieves `id` until it is served: each of the `dead` connections terminated under the pool
 * may fail one call with a 503 first, when the pool has not yet seen it close. The statuses.
 */
async function servedAgain(f: Faulty, dead: number): Promise<number[]> {
  const statuses: number[] = [];
  while (statuses.at(-1) !== 200 && statuses.length <= dead) statuses.push((await f.send.retrieve(f.id)).status);
  return statuses;
}

/** Terminates the backends `where` selects from pg_stat_activity, waiting until they are gone; how many. */
async function terminate(on: (sql: string) => Promise<unknown>, where: string): Promise<number> {
  const { rows } = (await on(`select pg_terminate_backend(pid, 10000) from pg_stat_activity where ${where}`)) as { rows: unknown[] };
  return rows.length;
}

gate('PostgreSQL stalled: requests in flight answer 503 within the bound, a creation in flight never commits, and all recovers', async (t) => {
  t.timeout(2 * (BOUND_MS + SLACK_MS), 'requests held while the database stalls');
  const f = await faultyApp(t);
  const { send, id } = f;
  const keys = new KnexKeyStore(f.database.knex, f.database.storeOptions);
  const usage = new KnexUsageStore(f.database.knex, f.database.storeOptions);

  f.proxy.stall();
  const storeCall = async (call: () => Promise<unknown>) => {
    const started = performance.now();
    const err = await call().catch((error: unknown) => error);
    return { status: toGatewayError(err, 'GET', '/').status, ms: performance.now() - started };
  };
  const answers = await Promise.all([
    send.retrieve(id),
    send.list(),
    send.upload(),
    storeCall(() => keys.findByHash('a'.repeat(64))),
    storeCall(() => usage.summarize({ account: 'a' }, 'day', 'model')), // the admin API's usage report
  ]);
  for (const answer of answers) {
    t.like(answer, { status: 503 });
    t.true(answer.ms < BOUND_MS + SLACK_MS, `answered after ${Math.round(answer.ms)} ms`);
  }
  t.like(answers[2], UNAVAILABLE);

  f.proxy.resume();
  // The abandoned creation reaches the server now; it rolls back instead of committing.
  await until(
    () => appBackends(f),
    ({ rows }) => rows.every((row) => row.state === 'idle'),
  );
  t.like(await send.retrieve(id), { status: 200 });
  t.deepEqual(await send.ids(), [id], 'the creation answered 503 was not made');
  t.like(await send.upload(), { status: 200 });
});

gate("PostgreSQL stalled under a key change's announcement: 503 within the bound, then announced again", async (t) => {
  t.timeout(2 * (BOUND_MS + SLACK_MS), 'an announcement held while the database stalls');
  const f = await faultyApp(t);
  const changes = new KnexKeyChanges(f.database.knex, f.database.storeOptions);
  const version = async () => Number((await f.direct('kmg_key_version').first('version'))?.version);
  await changes.publish('key_a');
  const before = await version();

  // Sent on the pool's open connection, into the stall.
  f.proxy.stall();
  const started = performance.now();
  const err = await changes.publish('key_a').catch((error: unknown) => error);
  t.like(toGatewayError(err, 'POST', '/'), { status: 503 });
  t.true(performance.now() - started < BOUND_MS + SLACK_MS);

  f.proxy.resume();
  await changes.publish('key_a');
  t.true((await version()) > before);
});

const idleInTransaction = async (f: Faulty) => (await appBackends(f)).rows.filter((row) => row.state === 'idle in transaction');

/**
 * An upload whose transaction loses PostgreSQL after the account's row is locked (the
 * `inFlight` fault starts as the transaction's second statement is sent), on a pool whose
 * connections are all open already.
 */
const transactionFault = test.macro(async (t, fault: 'stall' | 'drop') => {
  t.timeout(2 * (BOUND_MS + SLACK_MS), 'an upload held while the database is away');
  const f = await faultyApp(t);
  const { send, id } = f;
  let armed = true;
  f.database.knex.on('query', (query: { sql: string }) => {
    if (armed && query.sql.includes('count(*)')) {
      armed = false;
      f.proxy[fault]();
    }
  });

  // More uploads than the pool's 10 connections: none of them keeps one.
  const answers = await Promise.all(Array.from({ length: 12 }, () => send.upload()));
  for (const answer of answers) {
    t.like(answer, UNAVAILABLE);
    t.true(answer.ms < BOUND_MS + SLACK_MS, `answered after ${Math.round(answer.ms)} ms`);
  }
  // Given up, the transactions let go of their sessions: no lock held by an abandoned connection.
  t.deepEqual(
    await until(
      () => idleInTransaction(f),
      (rows) => rows.length === 0,
    ),
    [],
  );

  f.proxy.resume();
  t.deepEqual(await send.ids(), [id], 'the creation answered 503 was not made');
  t.like(await send.upload(), { status: 200 });
  t.like(await send.list(), { status: 200 });
  t.deepEqual(await idleInTransaction(f), []);
});

gate("PostgreSQL stalled under an upload's transaction: 503 within the bound, its session ended, all recovers", transactionFault, 'stall');
gate("PostgreSQL connection dropping bytes under an upload's transaction: 503 within the bound, its session ended, all recovers", transactionFault, 'drop');

gate(
  "KnexFileStore on Knex's own pool, no server-side timeout: a connection dropping bytes under a creation is destroyed at the bound, its session ends",
  async (t) => {
    t.timeout(2 * (BOUND_MS + SLACK_MS), 'a creation held while the connection loses bytes');
    const throwaway = await throwawayPostgres({ ownDatabase: true });
    closeAtEnd(t, throwaway.drop);
    const proxy = await startProxy();
    const direct = knexFactory({ client: 'pg', connection: throwaway.url, pool: { min: 0, max: 1 } });
    // Knex warns of the destroyed connection when its pool drops it.
    const proxied = knexFactory({ client: 'pg', connection: through(throwaway.url, proxy), pool: { min: 0, max: 2 }, log: { warn: () => undefined } });
    closeAtEnd(
      t,
      () => direct.destroy(),
      proxy.close,
      () => proxied.destroy(),
    );
    await migrate(direct);
    const files = new KnexFileStore(proxied, { timeoutMs: BOUND_MS });
    const record = (id: string) => ({ id, account: 'a', filename: 'a.pdf', bytes: 10, createdAt: 1, expiresAt: null });
    const limits = { maxFiles: 10, maxBytes: 1000 };
    t.true(await files.create(record('file-1'), limits, 1));
    let armed = true;
    proxied.on('query', (query: { sql: string }) => {
      if (armed && query.sql.includes('count(*)')) {
        armed = false;
        proxy.drop();
      }
    });

    const started = performance.now();
    const lost = await files.create(record('file-2'), limits, 1).catch((err: unknown) => err);
    t.is(toGatewayError(lost, 'POST', '/v1/files').status, 503);
    t.true(performance.now() - started < BOUND_MS + SLACK_MS);
    const sessions = () =>
      direct.raw<{ rows: Array<{ state: string }> }>('select state from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()');
    const left = await until(sessions, ({ rows }) => rows.every((row) => row.state !== 'idle in transaction'));
    t.deepEqual(
      left.rows.filter((row) => row.state === 'idle in transaction'),
      [],
    );

    proxy.resume();
    t.true(await files.create(record('file-3'), limits, 1));
    t.deepEqual([...(await files.existing(['file-1', 'file-2', 'file-3']))].sort(), ['file-1', 'file-3']);
  },
);

gate('PostgreSQL refusing connections: requests answer 503 at once, and all recovers when it listens again', async (t) => {
  const f = await faultyApp(t, LONG_BOUND_MS);
  const { send, id } = f;

  await f.proxy.cut();
  for (const answer of [await send.retrieve(id), await send.list(), await send.upload()]) {
    t.like(answer, UNAVAILABLE);
    t.true(answer.ms < LONG_BOUND_MS, `refused, yet answered after ${Math.round(answer.ms)} ms: it waited for the bound`);
  }

  await f.proxy.restore();
  t.like(await send.retrieve(id), { status: 200 });
  t.like(await send.upload(), { status: 200 });
});

gate('PostgreSQL terminating backends: the request in flight answers 503, idle connections are replaced, never a 500', async (t) => {
  const f = await faultyApp(t);
  const { send, id } = f;

  // Hold a retrieve (a prepared read on the pool) and a list (a Knex query) on a lock, then
  // terminate the backends that wait.
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked: () => void = () => undefined;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holding = f.direct.transaction(async (trx) => {
    await trx.raw('lock table kmg_files in access exclusive mode');
    locked();
    await released;
  });
  await lockTaken;
  const inFlight = [send.retrieve(id), send.list()];
  const waitingOnLock = ({ rows }: Awaited<ReturnType<typeof appBackends>>) => rows.filter((row) => row.wait_event_type === 'Lock');
  const backends = await until(
    () => appBackends(f),
    (result) => waitingOnLock(result).length === 2,
  );
  for (const { pid } of waitingOnLock(backends)) await f.direct.raw('select pg_terminate_backend(?)', [pid]);
  for (const answer of await Promise.all(inFlight)) t.like(answer, UNAVAILABLE);
  release();
  await holding;

  // Every connection of the app's pool, idle now, terminated.
  const dead = await terminate((sql) => f.direct.raw(sql), 'datname = current_database() and pid <> pg_backend_pid()');
  const statuses = await servedAgain(f, dead);
  t.true(
    statuses.every((status) => status === 200 || status === 503),
    `statuses ${statuses.join(', ')}`,
  );
  t.is(statuses.at(-1), 200);

  // One terminated between two statements of a transaction, while Knex holds it: that transaction
  // fails (pg's 'error' event, unlistened, would end the process).
  const between = f.database.knex.transaction(async (trx) => {
    const { rows } = await trx.raw<{ rows: Array<{ pid: number }> }>('select pg_backend_pid() as pid');
    const pid = rows[0]?.pid as number;
    await f.direct.raw('select pg_terminate_backend(?)', [pid]);
    await until(
      () => f.direct.raw<{ rows: unknown[] }>('select 1 from pg_stat_activity where pid = ?', [pid]),
      (result) => result.rows.length === 0,
    );
    await trx.raw('select 1');
  });
  // Whether pg has seen the socket close before the next statement or sees it under it, the
  // transaction fails as unreachable (pg's words differ between the two).
  const lost = await between.catch((err: unknown) => err);
  t.true(lost instanceof Error);
  t.is(toGatewayError(lost, 'POST', '/v1/files').status, 503);
  t.like(await send.retrieve(id), { status: 200 });
});

gate('PostgreSQL not accepting connections to the database (55000): 503, and all recovers when it does again', async (t) => {
  const f = await faultyApp(t);
  const { send, id } = f;

  await f.server(`alter database "${f.name}" allow_connections false`);
  const dead = await terminate(f.server, `datname = '${f.name}'`);
  t.like(await send.retrieve(id), UNAVAILABLE);
  t.like(await send.upload(), UNAVAILABLE);

  await f.server(`alter database "${f.name}" allow_connections true`);
  t.is((await servedAgain(f, dead)).at(-1), 200);
});

// pg gives these failures a message and nothing else: the mapping knows them by their exact text,
// which these tests pin against the installed drivers.
gate('pg failures that carry only a message are 503: a connection timeout, no pooled connection in time, a connection cut under a query', async (t) => {
  const proxy = await startProxy();
  closeAtEnd(t, proxy.close);
  const url = through(POSTGRES_URL, proxy);
  const unavailable = (err: unknown) => toGatewayError(err, 'GET', '/v1/files').status;

  proxy.stall();
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 100 });
  const connectTimeout = await client.connect().catch((err: unknown) => err);
  t.like(connectTimeout, { message: 'timeout expired' });
  t.is(unavailable(connectTimeout), 503);
  proxy.resume();

  const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 1000 });
  pool.on('error', () => undefined); // its idle connection, cut below
  closeAtEnd(t, () => pool.end());
  // The first connection may take longer than the timeout on a busy machine: asked again until the pool holds it.
  let held: pg.PoolClient | undefined;
  for (let attempt = 0; attempt < 10 && held === undefined; attempt++) held = await pool.connect().catch(() => undefined);
  if (held === undefined) throw new Error('no connection to PostgreSQL within 10 tries of a second');
  const poolTimeout = await pool.connect().catch((err: unknown) => err);
  held.release();
  t.like(poolTimeout, { message: 'timeout exceeded when trying to connect' });
  t.is(unavailable(poolTimeout), 503);

  const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } });
  const admin = knexFactory({ client: 'pg', connection: POSTGRES_URL, pool: { min: 0, max: 1 } });
  closeAtEnd(
    t,
    () => knex.destroy(),
    () => admin.destroy(),
  );
  const { rows } = await knex.raw<{ rows: Array<{ pid: number }> }>('select pg_backend_pid() as pid');
  const pid = rows[0]?.pid;
  closeAtEnd(t, () => admin.raw('select pg_terminate_backend(?)', [pid as number]));
  const sleeping = knex.raw('select pg_sleep(30)').catch((err: unknown) => err);
  await until(
    () => admin.raw<{ rows: unknown[] }>("select 1 from pg_stat_activity where pid = ? and state = 'active'", [pid as number]),
    (result) => result.rows.length > 0,
  );
  await proxy.cut();
  const cutUnder = await sleeping;
  t.like(cutUnder, { message: 'select pg_sleep(30) - Connection terminated unexpectedly' });
  t.is(unavailable(cutUnder), 503);
});
