import { spawn } from 'node:child_process';
import { createHash, hash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { join, resolve, sep } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { SCOPES } from '../../lib/auth/scopes.js';
import { KnexAuditStore } from '../../lib/stores/knex/audit-store.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { UsageError } from '../../reference-server/commands/command-line.js';
import { runCommand } from '../../reference-server/commands/index.js';
import { loadConfig } from '../../reference-server/config.js';
import { openMigratedDatabase } from '../../reference-server/database.js';
import { describeStore } from '../../reference-server/store-description.js';
import { serverDatabases, throwawayPostgres } from '../helpers/server-database.js';
import { ROOT, compiledCli, createKey, runCli, tempDataDir } from '../helpers/server-process.js';
import { withPostgres } from '../helpers/services.js';

// The CLI's commands, each against a data dir of its own and in this process (but for one that
// needs a pipe): through the command line (`runCli`: one line and an exit code for every failure),
// through `runCommand` (a bad command line is the UsageError it throws), and the store they name.

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(() => Promise.all(cleanups.map((cleanup) => cleanup())));

async function dataDir(): Promise<{ DATA_DIR: string }> {
  const temp = await tempDataDir();
  cleanups.push(temp.remove);
  return { DATA_DIR: join(temp.dir, 'data') };
}

test('keys create --json prints one document with the key, every scope and no allowlist by default', async (t) => {
  const env = await dataDir();
  const result = await runCli(['keys', 'create', '--account', 'acme', '--json'], env);
  t.is(result.code, 0, result.stderr);
  const created = JSON.parse(result.stdout) as Record<string, unknown>;
  // The admin API's key object, with the secret this once.
  t.deepEqual(Object.keys(created).sort(), [
    'account',
    'cache',
    'created_at',
    'expires_at',
    'hint',
    'id',
    'key',
    'last_used_at',
    'limits',
    'mcp_tools',
    'models',
    'name',
    'object',
    'replaced_by',
    'replaces',
    'revoked_at',
    'scopes',
    'status',
    'store',
  ]);
  t.is(created.cache, null);
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
    '--account',
    'acme',
    '--scope',
    'files:read',
    '--scope',
    'models:read',
    '--model',
    'echo-1',
    '--expires',
    '2099-01-01T00:00:00Z',
    '--cache',
    '600',
    '--cache-per-key',
  ]);
  t.deepEqual(created.scopes, ['files:read', 'models:read']);
  t.deepEqual(created.cache, { ttl_seconds: 600, per_key: true });
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
  await writeFile(
    config,
    JSON.stringify({ providers: [{ id: 'openai', kind: 'openai', apiKeyEnv: 'KMG_TEST_UNSET_KEY' }], models: [{ id: 'gpt', provider: 'openai' }] }),
  );
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

test('--help or -h after a command prints the usage and runs nothing: no key is made, no server started', async (t) => {
  const env = await dataDir();
  for (const args of [
    ['keys', 'create', '--help'],
    ['keys', 'create', '--account', 'acme', '-h'],
    ['serve', '--help'],
    ['usage', '--by', 'model', '--help'],
  ]) {
    const result = await runCli(args, env);
    t.deepEqual({ code: result.code, stderr: result.stderr }, { code: 0, stderr: '' }, args.join(' '));
    t.regex(result.stdout, /^Usage: koa-model-gateway <command>/, args.join(' '));
  }
  const listed = await runCli(['keys', 'list', '--json'], env);
  t.deepEqual(JSON.parse(listed.stdout), []);
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

/** Runs one command through `runCommand`; its output lines, joined. */
async function run(args: string[], env: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCommand(args, { env, out: (text) => out.push(text), err: (text) => err.push(text) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

test('keys create takes --rpm, --tpm, --tokens-per-day, --cost-per-day and --cost-per-month; list shows them, null for a limit left to the default', async (t) => {
  const env = await dataDir();
  const created = await run(['keys', 'create', '--account', 'acme', '--rpm', '10', '--tokens-per-day', '5000000', '--cost-per-month', '49.95', '--json'], env);
  t.is(created.code, 0, created.err);
  const limits = {
    requests_per_minute: 10,
    tokens_per_minute: null,
    tokens_per_day: 5_000_000,
    cost_per_day: null,
    cost_per_month: 49.95,
    cost_soft: null,
    cost_alert_thresholds: null,
  };
  t.deepEqual(JSON.parse(created.out).limits, limits);
  await run(['keys', 'create', '--account', 'acme', '--tpm', '40000'], env);
  const listed = JSON.parse((await run(['keys', 'list', '--json'], env)).out) as Array<{ limits: unknown }>;
  t.deepEqual(
    listed.map((key) => key.limits),
    [
      limits,
      {
        requests_per_minute: null,
        tokens_per_minute: 40_000,
        tokens_per_day: null,
        cost_per_day: null,
        cost_per_month: null,
        cost_soft: null,
        cost_alert_thresholds: null,
      },
    ],
  );
  t.regex((await run(['keys', 'list'], env)).out, /limits 10 requests\/min, 5000000 tokens\/day, 49.95 USD\/month\n.*limits 40000 tokens\/min$/);
});

for (const [option, value] of [
  ['--cost-per-day', '0'],
  ['--cost-per-month', '-5'],
  ['--cost-per-day', '1e-13'],
  ['--cost-per-day', 'Infinity'],
  ['--cost-per-day', '.5'],
  ['--cost-per-month', 'fifty'],
  ['--rpm', '0'],
  ['--tpm', '-5'],
  ['--tpm', '- 5'],
  ['--tokens-per-day', '1.5'],
  ['--rpm', '1e3'],
  ['--rpm', '99999999999999999999'],
]) {
  test(`keys create ${option}=${value} is refused with one line, and creates no key`, async (t) => {
    const env = await dataDir();
    await t.throwsAsync(run(['keys', 'create', '--account', 'acme', `${option}=${value}`], env), {
      instanceOf: UsageError,
      message: `${option} must be ${option?.startsWith('--cost') ? 'a positive number of USD, from 1e-12 (one picodollar) to 1e15' : 'a positive integer'}, got '${value}'`,
    });
    t.is((await run(['keys', 'list'], env)).out, 'No keys.');
  });
}

test('a budget option reads numbers as the admin API and the configuration file do: 5e0 is 5 USD, a negative number its value, refused by the rule', async (t) => {
  const env = await dataDir();
  const created = JSON.parse((await run(['keys', 'create', '--account', 'acme', '--cost-per-day', '5e0', '--cost-per-month', '1e-12', '--json'], env)).out) as {
    limits: unknown;
  };
  t.like(created.limits, { cost_per_day: 5, cost_per_month: 1e-12 });
  for (const args of [
    ['keys', 'create', '--account', 'acme', '--cost-per-day', '-1'],
    ['accounts', 'set-limits', 'acme', '--cost-per-day', '-1'],
  ]) {
    await t.throwsAsync(run(args, env), {
      instanceOf: UsageError,
      message: "--cost-per-day must be a positive number of USD, from 1e-12 (one picodollar) to 1e15, got '-1'",
    });
  }
  await t.throwsAsync(run(['keys', 'create', '--account', 'acme', '--rpm', '-5'], env), {
    instanceOf: UsageError,
    message: "--rpm must be a positive integer, got '-5'",
  });
});

test("accounts set-limits sets and removes an account's budgets; a bad amount or none given is refused", async (t) => {
  const env = await dataDir();
  const json = async (args: string[]) => JSON.parse((await run(['accounts', 'set-limits', ...args, '--json'], env)).out) as unknown;
  const unset = { costSoft: false, costAlertThresholds: null };
  t.deepEqual(await json(['acme', '--cost-per-day', '5', '--cost-per-month', '50']), { account: 'acme', costPerDay: 5, costPerMonth: 50, ...unset });
  t.deepEqual(await json(['acme', '--cost-per-day', 'none']), { account: 'acme', costPerDay: null, costPerMonth: 50, ...unset });
  t.is((await run(['accounts', 'set-limits', 'acme', '--cost-per-month', '60'], env)).out, 'Budgets of acme: none per day, 60 USD per month');
  await t.throwsAsync(run(['accounts', 'set-limits', 'acme', '--cost-per-day=-1'], env), {
    instanceOf: UsageError,
    message: "--cost-per-day must be a positive number of USD, from 1e-12 (one picodollar) to 1e15, got '-1'",
  });
  await t.throwsAsync(run(['accounts', 'set-limits', 'acme'], env), {
    instanceOf: UsageError,
    message: 'accounts set-limits needs --cost-per-day, --cost-per-month, --cost-soft or --cost-alert-thresholds',
  });
  await t.throwsAsync(run(['accounts', 'set-limits', '--cost-per-day', '1'], env), {
    instanceOf: UsageError,
    message: 'accounts set-limits needs exactly one account',
  });
});

test('soft budgets and alert thresholds are set by keys create and update and accounts set-limits, removed with none, recorded in the audit log; bad ones refused', async (t) => {
  const env = await dataDir();
  const runJson = async (args: string[]) => JSON.parse((await run([...args, '--json'], env)).out) as Record<string, unknown>;
  const created = await runJson(['keys', 'create', '--account', 'acme', '--cost-per-day', '2', '--cost-soft', 'true', '--cost-alert-thresholds', '90,25']);
  t.like(created.limits, { cost_per_day: 2, cost_soft: true, cost_alert_thresholds: [25, 90] });
  const id = created.id as string;
  t.like((await runJson(['keys', 'update', id, '--cost-soft', 'false'])).limits, { cost_per_day: 2, cost_soft: false, cost_alert_thresholds: [25, 90] });
  t.like((await runJson(['keys', 'update', id, '--cost-soft', 'none', '--cost-alert-thresholds', 'none'])).limits, {
    cost_per_day: 2,
    cost_soft: null,
    cost_alert_thresholds: null,
  });
  t.deepEqual(await runJson(['accounts', 'set-limits', 'acme', '--cost-per-month', '40', '--cost-soft', 'true', '--cost-alert-thresholds', '50,100']), {
    account: 'acme',
    costPerDay: null,
    costPerMonth: 40,
    costSoft: true,
    costAlertThresholds: [50, 100],
  });
  t.is(
    (await run(['accounts', 'set-limits', 'acme', '--cost-alert-thresholds', '75'], env)).out,
    'Budgets of acme: none per day, 40 USD per month, soft (alerts only), alerts at 75%',
  );
  t.like(await runJson(['accounts', 'set-limits', 'acme', '--cost-soft', 'false', '--cost-alert-thresholds', 'none']), {
    costSoft: false,
    costAlertThresholds: null,
  });
  const thresholdsRule = 'must be 1 to 10 whole percents of the budget, each from 1 to 1000, separated by commas';
  for (const [args, message] of [
    [['keys', 'create', '--account', 'acme', '--cost-soft', 'yes'], "--cost-soft must be true or false, got 'yes'"],
    [['accounts', 'set-limits', 'acme', '--cost-soft', 'none'], "--cost-soft must be true or false, got 'none'"],
    [['keys', 'update', id, '--cost-alert-thresholds', '0,50'], `--cost-alert-thresholds ${thresholdsRule}, got '0,50'`],
    [['accounts', 'set-limits', 'acme', '--cost-alert-thresholds', '50%'], `--cost-alert-thresholds ${thresholdsRule}, got '50%'`],
  ] as const) {
    await t.throwsAsync(run([...args], env), { instanceOf: UsageError, message });
  }

  const database = await openMigratedDatabase(loadConfig(env).database);
  try {
    const { entries } = await new KnexAuditStore(database.knex).list({ action: 'account.limits_set' }, { limit: 10 });
    t.deepEqual(
      entries.map((entry) => entry.changes),
      [
        { costSoft: { from: true, to: false }, costAlertThresholds: { from: [75], to: null } },
        { costAlertThresholds: { from: [50, 100], to: [75] } },
        { costPerMonth: { from: null, to: 40 }, costSoft: { from: false, to: true }, costAlertThresholds: { from: null, to: [50, 100] } },
      ],
    );
    const [updated] = (await new KnexAuditStore(database.knex).list({ action: 'key.updated' }, { limit: 1 })).entries;
    t.deepEqual(updated?.changes, {
      limits: {
        from: {
          requests_per_minute: null,
          tokens_per_minute: null,
          tokens_per_day: null,
          cost_per_day: 2,
          cost_per_month: null,
          cost_soft: false,
          cost_alert_thresholds: [25, 90],
        },
        to: {
          requests_per_minute: null,
          tokens_per_minute: null,
          tokens_per_day: null,
          cost_per_day: 2,
          cost_per_month: null,
          cost_soft: null,
          cost_alert_thresholds: null,
        },
      },
    });
  } finally {
    await database.close();
  }
});

test('keys create --mcp-tools and accounts set-mcp-tools set MCP grants; a glob of another form is refused', async (t) => {
  const env = await dataDir();
  const created = JSON.parse(
    (await run(['keys', 'create', '--account', 'acme', '--mcp-tools', 'github/*,search/web', '--mcp-tools', 'crm/*', '--json'], env)).out,
  ) as { mcp_tools: string[] };
  t.deepEqual(created.mcp_tools, ['github/*', 'search/web', 'crm/*']);
  t.deepEqual(JSON.parse((await run(['accounts', 'set-mcp-tools', 'acme', '--mcp-tools', 'github/*', '--json'], env)).out), {
    account: 'acme',
    mcp_tools: ['github/*'],
  });
  t.is((await run(['accounts', 'set-mcp-tools', 'acme', '--mcp-tools', 'none'], env)).out, 'MCP tools of acme: none');
  await t.throwsAsync(run(['accounts', 'set-mcp-tools', 'acme', '--mcp-tools', 'github'], env), {
    instanceOf: UsageError,
    message: /--mcp-tools takes globs over '\{server\}\/\{tool\}'.*got 'github'/,
  });
  await t.throwsAsync(run(['keys', 'create', '--account', 'acme', '--mcp-tools', 'a/b/c'], env), { instanceOf: UsageError, message: /got 'a\/b\/c'/ });
  await t.throwsAsync(run(['accounts', 'set-mcp-tools', 'acme'], env), {
    instanceOf: UsageError,
    message: 'accounts set-mcp-tools needs --mcp-tools <globs> (or none)',
  });
});

for (const [name, gated, database] of serverDatabases(test)) {
  gated(`${name}: keys create --name names the key; list shows the name and the secret's last four characters, never more`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const all = { ...(await dataDir()), ...env };
    const created = await run(['keys', 'create', '--account', 'acme', '--name', ' nightly batch ', '--json'], all);
    t.is(created.code, 0, created.err);
    const key = JSON.parse(created.out) as { id: string; key: string; name: string; hint: string; object: string; status: string; last_used_at: null };
    t.like(key, { object: 'api_key', status: 'active', name: 'nightly batch', hint: key.key.slice(-4), last_used_at: null });
    t.regex((await run(['keys', 'create', '--account', 'acme'], all)).out, /^Created key_\w+ for account acme\n/);
    const text = (await run(['keys', 'create', '--account', 'acme', '--name', 'ops'], all)).out;
    t.regex(text, /^Created key_\w+ \(ops\) for account acme\n/);

    const listed = (await run(['keys', 'list'], all)).out.split('\n');
    t.is(listed.length, 3);
    t.true(listed[0]?.includes(`${key.id}  acme  active  name "nightly batch"  kmg_sk_…${key.hint}  last used never  created`), listed[0]);
    t.false(listed.join('\n').includes(key.key.slice(-5)));
    const json = JSON.parse((await run(['keys', 'list', '--json'], all)).out) as Array<{ id: string; name: string | null; hint: string }>;
    t.deepEqual(
      json.map((entry) => entry.name),
      ['nightly batch', null, 'ops'],
    );
    t.like(json[0], { id: key.id, hint: key.hint });
  });
}

for (const [name, gated, database] of serverDatabases(test)) {
  gated(`${name}: keys update changes each field given and keeps the rest; keys rotate makes a new key once; both audited with the values`, async (t) => {
    const { env, drop } = await database();
    t.teardown(drop);
    const all = { ...(await dataDir()), ...env };
    const created = JSON.parse(
      (await run(['keys', 'create', '--account', 'acme', '--name', 'batch', '--rpm', '10', '--cost-per-day', '5', '--json'], all)).out,
    ) as { id: string };
    const update = async (...args: string[]) => {
      const answer = await run(['keys', 'update', created.id, ...args, '--json'], all);
      t.is(answer.code, 0, answer.err);
      return JSON.parse(answer.out) as Record<string, unknown>;
    };
    t.like(
      await update('--name', 'nightly', '--model', 'echo-1', '--scope', 'models:read', '--expires', '2099-01-01', '--tpm', '4000', '--cost-per-day', 'none'),
      {
        name: 'nightly',
        models: ['echo-1'],
        scopes: ['models:read'],
        expires_at: 4_070_908_800,
        limits: {
          requests_per_minute: 10,
          tokens_per_minute: 4000,
          tokens_per_day: null,
          cost_per_day: null,
          cost_per_month: null,
          cost_soft: null,
          cost_alert_thresholds: null,
        },
      },
    );
    t.like(await update('--name', 'none', '--every-model', '--expires', 'never', '--rpm', 'none', '--tpm', 'none'), {
      name: null,
      models: null,
      expires_at: null,
      limits: null,
      scopes: ['models:read'],
    });
    t.regex((await run(['keys', 'update', created.id, '--cost-per-month', '9'], all)).out, new RegExp(`^Updated ${created.id}: .*limits 9 USD/month$`));
    t.is((await run(['keys', 'update', 'key_missing', '--name', 'x'], all)).code, 1);
    await t.throwsAsync(run(['keys', 'update', created.id], all), { instanceOf: UsageError });
    await t.throwsAsync(run(['keys', 'update', created.id, '--rpm', '0'], all), { instanceOf: UsageError });

    const rotated = await run(['keys', 'rotate', created.id, '--grace', '600', '--json'], all);
    t.is(rotated.code, 0, rotated.err);
    const replacement = JSON.parse(rotated.out) as { id: string; key: string; replaces: { id: string; expires_at: number }; limits: unknown };
    t.like(replacement, { replaces: { id: created.id }, limits: { cost_per_month: 9 } });
    t.regex(replacement.key, /^kmg_sk_/);
    t.true(replacement.replaces.expires_at - Date.now() / 1000 <= 601);
    const again = await run(['keys', 'rotate', created.id], all);
    t.is(again.code, 1);
    t.regex(again.err, /rotated already/);
    await t.throwsAsync(run(['keys', 'rotate', created.id, '--grace', '-1'], all), { instanceOf: UsageError });

    // The audit log has each change with its values, and never the new key.
    const database_ = await openMigratedDatabase(loadConfig(all).database);
    t.teardown(() => database_.close());
    const { entries } = await new KnexAuditStore(database_.knex).list({ keyId: created.id }, { limit: 10 });
    t.deepEqual(
      entries.map((entry) => entry.action),
      ['key.rotated', 'key.updated', 'key.updated', 'key.updated', 'key.created'],
    );
    t.deepEqual(entries[3]?.changes?.name, { from: 'batch', to: 'nightly' });
    t.deepEqual(entries[2]?.changes?.limits?.to, null);
    t.false(JSON.stringify(entries).includes(replacement.key));
  });
}

for (const bad of ['', '   ', 'x'.repeat(101), 'tab\there', 'rtl\u202E']) {
  test(`keys create --name ${JSON.stringify(bad)} is refused with one line, and creates no key`, async (t) => {
    const env = await dataDir();
    await t.throwsAsync(run(['keys', 'create', '--account', 'acme', `--name=${bad}`], env), {
      instanceOf: UsageError,
      message: '--name must be 1 to 100 printable characters',
    });
    t.is((await run(['keys', 'list'], env)).out, 'No keys.');
  });
}

// An admin token's name is shown in the dashboard, the audit log and `admin-tokens list` as it reads.
for (const bad of ['x'.repeat(256), 'esc\u001b[31mred', 'line\r\nbreak', 'rtl\u202E']) {
  test(`admin-tokens create --name ${JSON.stringify(bad)} is refused with one line, and creates no token`, async (t) => {
    const env = await dataDir();
    await t.throwsAsync(run(['admin-tokens', 'create', `--name=${bad}`], env), {
      instanceOf: UsageError,
      message: '--name must be 1 to 255 printable characters',
    });
    t.is((await run(['admin-tokens', 'list', '--json'], env)).out, '[]');
  });
}

test('a negative limit written as a separate argument is refused with one line too', async (t) => {
  const err = await t.throwsAsync(run(['keys', 'create', '--account', 'acme', '--rpm', '-1'], await dataDir()), { instanceOf: UsageError });
  t.notRegex(err?.message ?? '', /\n/);
});

/** Writes `records` to the database the CLI opens for `env`, as a server would. */
async function writeUsage(env: Record<string, string>, records: UsageRecord[]): Promise<void> {
  const database = await openMigratedDatabase(loadConfig(env).database);
  try {
    await new KnexUsageStore(database.knex).insert(records);
  } finally {
    await database.close();
  }
}

test('usage --json prints the totals and rows (cost in USD too) of the calls it covers, from the server database', async (t) => {
  const env = await dataDir();
  await writeUsage(env, [
    usageRecord({ time: Date.parse('2030-01-15T10:00:00Z'), keyId: 'key_a', model: 'echo-1', inputTokens: 10, outputTokens: 1, costPicoUsd: 1_500_000 }),
    usageRecord({ time: Date.parse('2030-01-15T11:00:00Z'), keyId: 'key_b', model: 'echo-2', inputTokens: 20, outputTokens: 2 }),
    usageRecord({ time: Date.parse('2030-01-16T09:00:00Z'), keyId: 'key_a', model: 'echo-1', inputTokens: 40, outputTokens: 4, costPicoUsd: 250_000_000_000 }),
    usageRecord({ time: Date.parse('2030-01-16T09:30:00Z'), keyId: 'key_c', account: 'globex', inputTokens: 80, outputTokens: 8 }),
    usageRecord({ time: Date.parse('2030-01-16T09:45:00Z'), keyId: 'key_a', model: null, provider: null, status: 429, inputTokens: 0, outputTokens: 0 }),
  ]);
  const json = async (args: string[]) => {
    const result = await run(['usage', '--json', ...args], env);
    t.is(result.code, 0, result.err);
    return JSON.parse(result.out) as unknown;
  };
  t.deepEqual(await json(['--account', 'acme']), {
    by: 'day',
    totals: { requests: 4, answered: 3, refused: 1, input_tokens: 70, output_tokens: 7, cost_usd: 0.2500015, cache_hits: 0, cost_saved_usd: 0 },
    rows: [
      { day: '2030-01-15', requests: 2, answered: 2, refused: 0, input_tokens: 30, output_tokens: 3, cost_usd: 0.0000015, cache_hits: 0, cost_saved_usd: 0 },
      { day: '2030-01-16', requests: 2, answered: 1, refused: 1, input_tokens: 40, output_tokens: 4, cost_usd: 0.25, cache_hits: 0, cost_saved_usd: 0 },
    ],
  });
  t.deepEqual(await json(['--key', 'key_a', '--by', 'model']), {
    by: 'model',
    totals: { requests: 3, answered: 2, refused: 1, input_tokens: 50, output_tokens: 5, cost_usd: 0.2500015, cache_hits: 0, cost_saved_usd: 0 },
    rows: [
      { model: 'echo-1', requests: 2, answered: 2, refused: 0, input_tokens: 50, output_tokens: 5, cost_usd: 0.2500015, cache_hits: 0, cost_saved_usd: 0 },
      { model: null, requests: 1, answered: 0, refused: 1, input_tokens: 0, output_tokens: 0, cost_usd: 0, cache_hits: 0, cost_saved_usd: 0 },
    ],
  });
  t.deepEqual(await json(['--since', '2030-01-16', '--by', 'key']), {
    by: 'key',
    totals: { requests: 3, answered: 2, refused: 1, input_tokens: 120, output_tokens: 12, cost_usd: 0.25, cache_hits: 0, cost_saved_usd: 0 },
    rows: [
      { key: 'key_a', requests: 2, answered: 1, refused: 1, input_tokens: 40, output_tokens: 4, cost_usd: 0.25, cache_hits: 0, cost_saved_usd: 0 },
      { key: 'key_c', requests: 1, answered: 1, refused: 0, input_tokens: 80, output_tokens: 8, cost_usd: 0, cache_hits: 0, cost_saved_usd: 0 },
    ],
  });
});

test('usage prints a table with a total line, requests split into answered and refused; with nothing recorded, zeros', async (t) => {
  const env = await dataDir();
  t.is(
    (await run(['usage'], env)).out,
    [
      'day    requests  answered  refused  input_tokens  output_tokens  cost_usd',
      'total         0         0        0             0              0         0',
    ].join('\n'),
  );
  await writeUsage(env, [
    usageRecord({ time: Date.parse('2030-01-15T10:00:00Z'), inputTokens: 1234, outputTokens: 5, costPicoUsd: 3_777_000_000 }),
    usageRecord({ time: Date.parse('2030-01-15T10:00:01Z'), model: null, provider: null, status: 400, inputTokens: 0, outputTokens: 0 }),
  ]);
  t.is(
    (await run(['usage', '--by', 'model'], env)).out,
    [
      'model                                requests  answered  refused  input_tokens  output_tokens  cost_usd',
      'echo-1                                      1         1        0          1234              5  0.003777',
      '(refused before a model was chosen)         1         0        1             0              0         0',
      'total                                       2         1        1          1234              5  0.003777',
    ].join('\n'),
  );
});

for (const [name, gated, database] of serverDatabases(test)) {
  gated(`${name}: usage export writes every record of the period, newest first: CSV with a header (a field with a comma quoted), or JSON Lines`, async (t) => {
    const { env: databaseEnv, drop } = await database();
    t.teardown(drop);
    const env = { ...(await dataDir()), ...databaseEnv };
    await writeUsage(env, [
      usageRecord({ requestId: 'req_before', time: Date.parse('2030-01-14T23:59:59Z') }),
      usageRecord({ requestId: 'req_first', time: Date.parse('2030-01-15T10:00:00Z'), account: 'acme, inc "west"', costPicoUsd: 1_500_000 }),
      usageRecord({ requestId: 'req_second', time: Date.parse('2030-01-15T11:00:00Z'), model: null, provider: null, status: 429 }),
      usageRecord({ requestId: 'req_after', time: Date.parse('2030-01-16T00:00:00Z') }),
    ]);
    const csv = await run(['usage', 'export', '--since', '2030-01-15', '--until', '2030-01-16'], env);
    t.is(csv.code, 0, csv.err);
    const [header, ...rows] = csv.out.split('\n');
    t.true(header?.startsWith('request_id,time,account,key_id,endpoint,model,deployment,'));
    t.deepEqual(
      rows.map((row) => row.split(',').slice(0, 3)),
      [
        ['req_second', '2030-01-15T11:00:00.000Z', 'acme'],
        ['req_first', '2030-01-15T10:00:00.000Z', '"acme'],
      ],
    );
    t.true(rows[1]?.includes(',"acme, inc ""west""",'));
    const jsonl = await run(['usage', 'export', '--since', '2030-01-15T10:30:00Z', '--format', 'jsonl'], env);
    t.deepEqual(
      jsonl.out
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .map((record) => [record.request_id, record.model, record.status]),
      [
        ['req_after', 'echo-1', 200],
        ['req_second', null, 429],
      ],
    );
    const daily = await run(['usage', 'export', '--since', '2030-01-15', '--until', '2030-01-16', '--rollups', 'day'], env);
    t.deepEqual(
      daily.out.split('\n').map((row) => row.split(',').slice(0, 2).concat(row.split(',').slice(-6, -5))),
      [
        ['period', 'account', 'requests'],
        ['2030-01-15T00:00:00.000Z', 'acme', '1'],
        ['2030-01-15T00:00:00.000Z', '"acme', '1'],
      ],
    );
    t.true(daily.out.startsWith('period,account,key_id,model,endpoint,status,requests,input_tokens,output_tokens,cost_usd,cache_hits,cost_saved_usd\n'));
    await t.throwsAsync(run(['usage', 'export', '--format', 'csv'], env), {
      instanceOf: UsageError,
      message: '--since is required: the start of the period to export',
    });
    await t.throwsAsync(run(['usage', 'export', '--since', '2030-01-15', '--format', 'xml'], env), {
      instanceOf: UsageError,
      message: "--format must be csv or jsonl, got 'xml'",
    });
  });
}

for (const [args, message] of [
  [['--by', 'month'], "--by must be day, model or key, got 'month'"],
  [['--since', 'yesterday'], "--since must be an ISO 8601 time such as 2030-01-31T00:00:00Z, got 'yesterday'"],
  // As the admin API's key parameter: a key id, never an empty report for a name that cannot be one.
  [['--key', 'bad!'], '--key must be a key id: 1 to 64 letters, digits, _ and -'],
] as const) {
  test(`usage ${args.join(' ')} is refused with one line`, async (t) => {
    await t.throwsAsync(run(['usage', ...args], await dataDir()), { instanceOf: UsageError, message });
  });
}

test("the CLI's changes are recorded in the audit log, by cli and the OS user, never with a key or token in them", async (t) => {
  const env = await dataDir();
  const key = JSON.parse((await run(['keys', 'create', '--account', 'acme', '--scope', 'models:read', '--rpm', '5', '--json'], env)).out) as {
    id: string;
    key: string;
  };
  t.is((await run(['keys', 'revoke', key.id], env)).code, 0);
  // Revoking again succeeds and changes nothing: no second entry.
  t.is((await run(['keys', 'revoke', key.id], env)).code, 0);
  const admin = JSON.parse((await run(['admin-tokens', 'create', '--name', 'ops', '--json'], env)).out) as { id: string; token: string };
  t.is((await run(['admin-tokens', 'revoke', admin.id], env)).code, 0);
  t.is((await run(['accounts', 'set-limits', 'acme', '--cost-per-day', '5'], env)).code, 0);
  // Refused commands change nothing and record nothing.
  t.is((await run(['keys', 'revoke', 'key_doesnotexist'], env)).code, 1);
  t.is((await run(['admin-tokens', 'revoke', 'adm_doesnotexist'], env)).code, 1);

  const database = await openMigratedDatabase(loadConfig(env).database);
  try {
    const { entries } = await new KnexAuditStore(database.knex).list({}, { limit: 100 });
    t.deepEqual(
      entries.map((entry) => [entry.action, entry.keyId ?? entry.tokenId ?? entry.account, entry.fields]),
      [
        ['account.limits_set', 'acme', ['costPerDay']],
        ['admin_token.revoked', admin.id, []],
        ['admin_token.created', admin.id, ['name']],
        ['key.revoked', key.id, []],
        ['key.created', key.id, ['account', 'scopes', 'limits']],
      ],
    );
    for (const entry of entries) t.like(entry, { actor: { type: 'cli', id: null, name: userInfo().username }, address: null });
    t.is(entries[1]?.account, null);
    t.is(entries[3]?.account, 'acme');
    const rows = JSON.stringify(await database.knex('kmg_audit_log').select());
    for (const secret of [key.key, admin.token, hash('sha256', key.key, 'hex'), hash('sha256', admin.token, 'hex')]) t.false(rows.includes(secret));
  } finally {
    await database.close();
  }
});

// The CLI names the store it wrote a key or an admin token to (a key made in the wrong database is
// otherwise a 401 later), on stderr so that stdout stays what scripts read; never a password.

/** Runs one command; its output and error lines, each as written. */
async function runWithLines(args: string[], env: Record<string, string>): Promise<{ code: number; out: string[]; err: string[] }> {
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
    const text = await runWithLines([...args], env);
    t.is(text.code, 0, text.err.join('\n'));
    t.deepEqual(text.err, [`in ${kind} ${location}`]);
    const lines = text.out.join('\n').split('\n');
    t.is(lines.filter((line) => secret.test(line)).length, 1, 'the secret is on a line of its own on stdout');
    t.false(text.out.join('\n').includes(location), 'stdout does not name the store');

    const json = await runWithLines([...args, '--json'], env);
    t.is(json.code, 0);
    t.deepEqual(json.err, []);
    t.deepEqual((JSON.parse(json.out.join('')) as { store: unknown }).store, { kind, location });
  }
}

test('on SQLite, keys create and admin-tokens create name the file', async (t) => {
  const env = await dataDir();
  await assertStoreNamed(t, env, 'SQLite', join(env.DATA_DIR, 'gateway.sqlite'));
});

withPostgres(test)('on PostgreSQL, they name user, host, port and database, never the password', async (t) => {
  const [{ DATA_DIR }, database] = await Promise.all([dataDir(), throwawayPostgres()]);
  cleanups.push(() => database.drop());
  const url = new URL(database.url);
  url.password = 'not-shown-secret';
  const env = { DATA_DIR, DATABASE_URL: url.toString() };
  const user = url.username === '' ? '' : `${url.username}@`;
  await assertStoreNamed(t, env, 'PostgreSQL', `postgres://${user}${url.hostname}:${url.port || '5432'}${url.pathname}`);
  const json = await runWithLines(['keys', 'create', '--account', 'acme', '--json'], env);
  t.false(json.out.join('').includes('not-shown-secret'));
});

test('describeStore: a file inside the working directory is shown relative to it; a query and the password are dropped', (t) => {
  t.deepEqual(describeStore({ client: 'sqlite', filename: resolve('/srv/gw/data/gateway.sqlite') }, resolve('/srv/gw')), {
    kind: 'SQLite',
    location: `.${sep}${join('data', 'gateway.sqlite')}`,
  });
  t.deepEqual(describeStore({ client: 'sqlite', filename: resolve('/var/lib/gw.sqlite') }, resolve('/srv/gw')), {
    kind: 'SQLite',
    location: resolve('/var/lib/gw.sqlite'),
  });
  const connectionString = 'postgresql://gateway:p%40ss@db.internal/gw?sslmode=require&password=other';
  t.deepEqual(describeStore({ client: 'pg', connectionString, display: '' }), { kind: 'PostgreSQL', location: 'postgres://gateway@db.internal:5432/gw' });
  t.deepEqual(describeStore({ client: 'pg', connectionString: 'postgres://db:6543/gw', display: '' }), {
    kind: 'PostgreSQL',
    location: 'postgres://db:6543/gw',
  });
});
