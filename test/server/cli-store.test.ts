import { join, resolve, sep } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { runCommand } from '../../reference-server/commands/index.js';
import { describeStore } from '../../reference-server/store-description.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { tempDataDir } from '../helpers/server-process.js';
import { withPostgres } from '../helpers/services.js';

// The CLI names the store it wrote a key or an admin token to (a key made in the wrong database is
// otherwise a 401 later), on stderr so that stdout stays what scripts read; never a password.

const cleanups: Array<() => Promise<void>> = [];
test.after.always(() => Promise.all(cleanups.map((cleanup) => cleanup())));

async function dataDir(): Promise<string> {
  const temp = await tempDataDir();
  cleanups.push(() => temp.remove());
  return join(temp.dir, 'data');
}

async function run(args: string[], env: Record<string, string>): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCommand(args, { env, out: (text) => out.push(text), err: (text) => err.push(text) });
  return { code, out, err };
}

/** Both commands, as text and as JSON: the line on stderr, the `store` field, stdout's secret line alone. */
async function assertStoreNamed(t: ExecutionContext, env: Record<string, string>, kind: string, location: string) {
  for (const [args, secret] of [
    [['keys', 'create', '--account', 'acme'], /^kmg_sk_/],
    [['admin-tokens', 'create', '--name', 'ops'], /^kmg_admin_/],
  ] as const) {
    const text = await run([...args], env);
    t.is(text.code, 0, text.err.join('\n'));
    t.deepEqual(text.err, [`in ${kind} ${location}`]);
    const lines = text.out.join('\n').split('\n');
    t.is(lines.filter((line) => secret.test(line)).length, 1, 'the secret is on a line of its own on stdout');
    t.false(text.out.join('\n').includes(location), 'stdout does not name the store');

    const json = await run([...args, '--json'], env);
    t.is(json.code, 0);
    t.deepEqual(json.err, []);
    t.deepEqual((JSON.parse(json.out.join('')) as { store: unknown }).store, { kind, location });
  }
}

test('on SQLite, keys create and admin-tokens create name the file', async (t) => {
  const dir = await dataDir();
  await assertStoreNamed(t, { DATA_DIR: dir }, 'SQLite', join(dir, 'gateway.sqlite'));
});

withPostgres(test)('on PostgreSQL, they name user, host, port and database, never the password', async (t) => {
  const [dir, database] = await Promise.all([dataDir(), throwawayPostgres()]);
  cleanups.push(() => database.drop());
  const url = new URL(database.url);
  url.password = 'not-shown-secret';
  const env = { DATA_DIR: dir, DATABASE_URL: url.toString() };
  const user = url.username === '' ? '' : `${url.username}@`;
  await assertStoreNamed(t, env, 'PostgreSQL', `postgres://${user}${url.hostname}:${url.port || '5432'}${url.pathname}`);
  const json = await run(['keys', 'create', '--account', 'acme', '--json'], env);
  t.false(json.out.join('').includes('not-shown-secret'));
});

test('describeStore: a file inside the working directory is shown relative to it; a query and the password are dropped', (t) => {
  t.deepEqual(describeStore({ client: 'sqlite', filename: resolve('/srv/gw/data/gateway.sqlite') }, resolve('/srv/gw')), {
    kind: 'SQLite',
    location: `.${sep}${join('data', 'gateway.sqlite')}`,
  });
  t.deepEqual(describeStore({ client: 'sqlite', filename: resolve('/var/lib/gw.sqlite') }, resolve('/srv/gw')), { kind: 'SQLite', location: resolve('/var/lib/gw.sqlite') });
  const connectionString = 'postgresql://gateway:p%40ss@db.internal/gw?sslmode=require&password=other';
  t.deepEqual(describeStore({ client: 'pg', connectionString, display: '' }), { kind: 'PostgreSQL', location: 'postgres://gateway@db.internal:5432/gw' });
  t.deepEqual(describeStore({ client: 'pg', connectionString: 'postgres://db:6543/gw', display: '' }), { kind: 'PostgreSQL', location: 'postgres://db:6543/gw' });
});
