import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { SCOPES } from '../../lib/auth/scopes.js';
import { runCommand } from '../../reference-server/commands/index.js';
import { ROOT, compiledCli, createKey, runCli, tempDataDir } from '../helpers/server-process.js';

const dirs: Array<{ remove(): Promise<void> }> = [];
test.after.always(() => Promise.all(dirs.map((dir) => dir.remove())));

async function dataDir() {
  const temp = await tempDataDir();
  dirs.push(temp);
  return { DATA_DIR: join(temp.dir, 'data') };
}

test('keys create --json prints one document with the key, every scope and no allowlist by default', async (t) => {
  const env = await dataDir();
  const result = await runCli(['keys', 'create', '--account', 'acme', '--json'], env);
  t.is(result.code, 0, result.stderr);
  const created = JSON.parse(result.stdout) as Record<string, unknown>;
  // The admin API's key object, with the secret this once.
  t.deepEqual(Object.keys(created).sort(), [
    'account', 'created_at', 'expires_at', 'hint', 'id', 'key', 'last_used_at', 'limits', 'models', 'name', 'object', 'replaced_by', 'replaces', 'revoked_at', 'scopes', 'status', 'store',
  ]);
  t.regex(created.key as string, /^kmg_sk_[A-Za-z0-9_-]{43}$/);
  t.regex(created.id as string, /^key_/);
  t.is(created.account, 'acme');
  t.deepEqual(created.scopes, [...SCOPES]);
  t.is(created.models, null);
  t.true(existsSync(join(env.DATA_DIR, 'gateway.sqlite')), 'the data dir and database are created on first run');
});

test('keys create takes scopes, models and an expiry; list shows them and never the key', async (t) => {
  const env = await dataDir();
  const created = await createKey(env, [
    '--account', 'acme', '--scope', 'files:read', '--scope', 'models:read', '--model', 'echo-1', '--expires', '2099-01-01T00:00:00Z',
  ]);
  t.deepEqual(created.scopes, ['files:read', 'models:read']);
  t.deepEqual(created.models, ['echo-1']);
  await createKey(env, ['--account', 'other']);

  const listed = await runCli(['keys', 'list', '--account', 'acme', '--json'], env);
  t.is(listed.code, 0, listed.stderr);
  t.false(listed.stdout.includes(created.key));
  t.like(JSON.parse(listed.stdout), [
    { id: created.id, account: 'acme', scopes: ['files:read', 'models:read'], models: ['echo-1'], expires_at: 4_070_908_800, revoked_at: null },
  ]);
  t.is((JSON.parse(listed.stdout) as unknown[]).length, 1);
  const all = JSON.parse((await runCli(['keys', 'list', '--json'], env)).stdout) as unknown[];
  t.is(all.length, 2);
});

test('keys create warns about an allowlisted model that is not in the catalog, and creates the key', async (t) => {
  const env = await dataDir();
  const result = await runCli(['keys', 'create', '--account', 'acme', '--model', 'echo-1', '--model', 'ecoh-2', '--json'], env);
  t.is(result.code, 0);
  t.is(result.stderr, "koa-model-gateway: warning: model 'ecoh-2' is not in the catalog\n");
  t.deepEqual((JSON.parse(result.stdout) as { models: string[] }).models, ['echo-1', 'ecoh-2']);
});

test('keys create without --json shows the key exactly once, on a line of its own', async (t) => {
  const env = await dataDir();
  const result = await runCli(['keys', 'create', '--account', 'acme'], env);
  t.is(result.code, 0, result.stderr);
  const keys = result.stdout.split('\n').filter((line) => /^kmg_sk_/.test(line));
  t.is(keys.length, 1);
  t.is(result.stdout.split(keys[0] as string).length, 2);
});

test('the key prefix comes from the config file', async (t) => {
  const env = await dataDir();
  const config = join(env.DATA_DIR, '..', 'gateway.json');
  await writeFile(config, JSON.stringify({ keyPrefix: 'acme' }));
  const created = await createKey({ ...env, GATEWAY_CONFIG: config }, ['--account', 'a']);
  t.regex(created.key, /^acme_sk_/);
});

test("the key commands run without the providers' credential variables set", async (t) => {
  const env = await dataDir();
  const config = join(env.DATA_DIR, '..', 'gateway.json');
  await writeFile(config, JSON.stringify({ providers: [{ id: 'openai', kind: 'openai', apiKeyEnv: 'KMG_TEST_UNSET_KEY' }], models: [{ id: 'gpt', provider: 'openai' }] }));
  const out: string[] = [];
  const err: string[] = [];
  const io = { env: { ...env, GATEWAY_CONFIG: config }, out: (text: string) => out.push(text), err: (text: string) => err.push(text) };
  t.is(await runCommand(['keys', 'create', '--account', 'a', '--model', 'gpt', '--json'], io), 0);
  const { id } = JSON.parse(out[0] ?? '') as { id: string };
  t.is(await runCommand(['keys', 'list', '--json'], io), 0);
  t.is(await runCommand(['keys', 'revoke', id], io), 0);
  t.deepEqual(err, []);
});

test('keys revoke marks the key revoked; an unknown id fails with one line', async (t) => {
  const env = await dataDir();
  const created = await createKey(env, ['--account', 'acme']);
  const revoked = await runCli(['keys', 'revoke', created.id, '--json'], env);
  t.is(revoked.code, 0, revoked.stderr);
  t.deepEqual(JSON.parse(revoked.stdout), { id: created.id, revoked: true });
  const [listed] = JSON.parse((await runCli(['keys', 'list', '--json'], env)).stdout) as Array<{ revoked_at: number | null }>;
  t.is(typeof listed?.revoked_at, 'number');

  const unknown = await runCli(['keys', 'revoke', 'key_nope'], env);
  t.is(unknown.code, 1);
  t.is(unknown.stderr, "koa-model-gateway: no key with id 'key_nope'\n");
});

test('admin-tokens create --json prints { id, token } once, stored as its SHA-256 only; list shows it, revoke revokes it', async (t) => {
  const env = await dataDir();
  const created = await runCli(['admin-tokens', 'create', '--name', 'ops laptop', '--json'], env);
  t.is(created.code, 0, created.stderr);
  const { id, token, ...rest } = JSON.parse(created.stdout) as { id: string; token: string };
  t.deepEqual(rest, { store: { kind: 'SQLite', location: join(env.DATA_DIR, 'gateway.sqlite') } });
  t.regex(id, /^adm_[A-Za-z0-9]{24}$/);
  t.regex(token, /^kmg_admin_[A-Za-z0-9_-]{43}$/);
  // The database file and its write-ahead log, whichever holds the row now.
  const database = Buffer.concat(
    await Promise.all(['gateway.sqlite', 'gateway.sqlite-wal'].map((name) => readFile(join(env.DATA_DIR, name)).catch(() => Buffer.alloc(0)))),
  );
  t.false(database.includes(token.slice(-43)), 'the secret is nowhere in the database');
  t.true(database.includes(createHash('sha256').update(token).digest('hex')));

  const revoked = await runCli(['admin-tokens', 'revoke', id, '--json'], env);
  t.deepEqual(JSON.parse(revoked.stdout), { id, revoked: true });
  const listed = await runCli(['admin-tokens', 'list', '--json'], env);
  t.false(listed.stdout.includes(token));
  t.like(JSON.parse(listed.stdout), [{ id, name: 'ops laptop' }]);
  t.is(typeof (JSON.parse(listed.stdout) as Array<{ revoked_at: number }>)[0]?.revoked_at, 'number');
});

test('migrate --json reports the database it migrated', async (t) => {
  const env = await dataDir();
  const result = await runCli(['migrate', '--json'], env);
  t.is(result.code, 0, result.stderr);
  t.deepEqual(JSON.parse(result.stdout), { database: `sqlite:${join(env.DATA_DIR, 'gateway.sqlite')}`, migrated: true });
});

const usageErrors: Array<[string, string[], RegExp]> = [
  ['no account', ['keys', 'create'], /--account/],
  ['an account name with U+202E', ['keys', 'create', '--account', 'acme\u202Efdp.exe'], /--account must be 1 to 255 characters of well-formed Unicode/],
  // A lone surrogate reaches the process as U+FFFD, as any argument that is not UTF-8 does.
  ['an account name with a lone surrogate', ['keys', 'create', '--account', 'a\ud800b'], /--account must be/],
  ['an unknown scope', ['keys', 'create', '--account', 'a', '--scope', 'files:everything'], /unknown scope 'files:everything'/],
  ['an expiry that is not a time', ['keys', 'create', '--account', 'a', '--expires', 'tomorrow'], /--expires/],
  ['an expiry in the past', ['keys', 'create', '--account', 'a', '--expires', '2001-01-01T00:00:00Z'], /future/],
  ['an unknown option', ['keys', 'list', '--acount', 'a'], /--acount/],
  ['an unknown command', ['serv'], /unknown command 'serv'/],
  ['revoke without an id', ['keys', 'revoke'], /exactly one id/],
  ['an unknown admin-tokens subcommand', ['admin-tokens', 'show'], /unknown admin-tokens subcommand 'show'/],
];
for (const [name, args, message] of usageErrors) {
  test(`${name} is a usage error: exit 2 and one line`, async (t) => {
    const result = await runCli(args, await dataDir());
    t.is(result.code, 2);
    t.regex(result.stderr, message);
    t.regex(result.stderr, /^koa-model-gateway: [^\n]+\n$/);
    t.is(result.stdout, '');
  });
}

test('--help prints the usage', async (t) => {
  const result = await runCli(['--help'], await dataDir());
  t.is(result.code, 0);
  t.regex(result.stdout, /keys create --account <id>/);
});

test('keys list into a reader that stops early (| head) ends quietly, not in a crash', async (t) => {
  const env = await dataDir();
  await createKey(env, ['--account', 'acme']);
  const child = spawn(process.execPath, [await compiledCli(), 'keys', 'list'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
  child.stdout.destroy(); // the reader is gone before the CLI writes its first line
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise((resolve) => child.once('close', resolve));
  t.is(stderr, '');
  t.is(code, 0);
});
