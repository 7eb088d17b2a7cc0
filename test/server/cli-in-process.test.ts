import { hash } from 'node:crypto';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { KnexAuditStore } from '../../lib/stores/knex/audit-store.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import { UsageError } from '../../reference-server/commands/command-line.js';
import { runCommand } from '../../reference-server/commands/index.js';
import { loadConfig } from '../../reference-server/config.js';
import { openMigratedDatabase } from '../../reference-server/database.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { tempDataDir } from '../helpers/server-process.js';
import { withPostgres } from '../helpers/services.js';

// The CLI's commands run in this process against a data dir of their own: no tsx start-up per call.
const dirs: Array<{ remove(): Promise<void> }> = [];
test.after.always(() => Promise.all(dirs.map((dir) => dir.remove())));

async function dataDir(): Promise<{ DATA_DIR: string }> {
  const temp = await tempDataDir();
  dirs.push(temp);
  return { DATA_DIR: join(temp.dir, 'data') };
}

/** Runs one command; its output lines, joined. */
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
  const limits = { requests_per_minute: 10, tokens_per_minute: null, tokens_per_day: 5_000_000, cost_per_day: null, cost_per_month: 49.95 };
  t.deepEqual(JSON.parse(created.out).limits, limits);
  await run(['keys', 'create', '--account', 'acme', '--tpm', '40000'], env);
  const listed = JSON.parse((await run(['keys', 'list', '--json'], env)).out) as Array<{ limits: unknown }>;
  t.deepEqual(
    listed.map((key) => key.limits),
    [limits, { requests_per_minute: null, tokens_per_minute: 40_000, tokens_per_day: null, cost_per_day: null, cost_per_month: null }],
  );
  t.regex((await run(['keys', 'list'], env)).out, /limits 10 requests\/min, 5000000 tokens\/day, 49.95 USD\/month\n.*limits 40000 tokens\/min$/);
});

for (const [option, value] of [
  ['--cost-per-day', '0'],
  ['--cost-per-month', '-5'],
  ['--cost-per-day', '1e3'],
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
      message: `${option} must be ${option?.startsWith('--cost') ? 'a positive number of USD' : 'a positive integer'}, got '${value}'`,
    });
    t.is((await run(['keys', 'list'], env)).out, 'No keys.');
  });
}

test('accounts set-limits sets and removes an account\'s budgets; a bad amount or none given is refused', async (t) => {
  const env = await dataDir();
  const json = async (args: string[]) => JSON.parse((await run(['accounts', 'set-limits', ...args, '--json'], env)).out) as unknown;
  t.deepEqual(await json(['acme', '--cost-per-day', '5', '--cost-per-month', '50']), { account: 'acme', costPerDay: 5, costPerMonth: 50 });
  t.deepEqual(await json(['acme', '--cost-per-day', 'none']), { account: 'acme', costPerDay: null, costPerMonth: 50 });
  t.is((await run(['accounts', 'set-limits', 'acme', '--cost-per-month', '60'], env)).out, 'Budgets of acme: none per day, 60 USD per month');
  await t.throwsAsync(run(['accounts', 'set-limits', 'acme', '--cost-per-day=-1'], env), { instanceOf: UsageError, message: "--cost-per-day must be a positive number of USD, got '-1'" });
  await t.throwsAsync(run(['accounts', 'set-limits', 'acme'], env), { instanceOf: UsageError, message: 'accounts set-limits needs --cost-per-day or --cost-per-month' });
  await t.throwsAsync(run(['accounts', 'set-limits', '--cost-per-day', '1'], env), { instanceOf: UsageError, message: 'accounts set-limits needs exactly one account' });
});

for (const [name, gated, database] of [
  ['sqlite', test, async () => ({ env: {}, drop: async () => undefined })],
  [
    'postgres',
    withPostgres(test),
    async () => {
      const db = await throwawayPostgres();
      return { env: { DATABASE_URL: db.url }, drop: db.drop };
    },
  ],
] as const) {
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
    totals: { requests: 4, answered: 3, refused: 1, input_tokens: 70, output_tokens: 7, cost_usd: 0.2500015 },
    rows: [
      { day: '2030-01-15', requests: 2, answered: 2, refused: 0, input_tokens: 30, output_tokens: 3, cost_usd: 0.0000015 },
      { day: '2030-01-16', requests: 2, answered: 1, refused: 1, input_tokens: 40, output_tokens: 4, cost_usd: 0.25 },
    ],
  });
  t.deepEqual(await json(['--key', 'key_a', '--by', 'model']), {
    by: 'model',
    totals: { requests: 3, answered: 2, refused: 1, input_tokens: 50, output_tokens: 5, cost_usd: 0.2500015 },
    rows: [
      { model: 'echo-1', requests: 2, answered: 2, refused: 0, input_tokens: 50, output_tokens: 5, cost_usd: 0.2500015 },
      { model: null, requests: 1, answered: 0, refused: 1, input_tokens: 0, output_tokens: 0, cost_usd: 0 },
    ],
  });
  t.deepEqual(await json(['--since', '2030-01-16', '--by', 'key']), {
    by: 'key',
    totals: { requests: 3, answered: 2, refused: 1, input_tokens: 120, output_tokens: 12, cost_usd: 0.25 },
    rows: [
      { key: 'key_a', requests: 2, answered: 1, refused: 1, input_tokens: 40, output_tokens: 4, cost_usd: 0.25 },
      { key: 'key_c', requests: 1, answered: 1, refused: 0, input_tokens: 80, output_tokens: 8, cost_usd: 0 },
    ],
  });
});

test('usage prints a table with a total line, requests split into answered and refused; with nothing recorded, zeros', async (t) => {
  const env = await dataDir();
  t.is(
    (await run(['usage'], env)).out,
    ['day    requests  answered  refused  input_tokens  output_tokens  cost_usd', 'total         0         0        0             0              0         0'].join('\n'),
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

for (const [args, message] of [
  [['--by', 'month'], "--by must be day, model or key, got 'month'"],
  [['--since', 'yesterday'], "--since must be an ISO 8601 time such as 2030-01-31T00:00:00Z, got 'yesterday'"],
] as const) {
  test(`usage ${args.join(' ')} is refused with one line`, async (t) => {
    await t.throwsAsync(run(['usage', ...args], await dataDir()), { instanceOf: UsageError, message });
  });
}

test("the CLI's changes are recorded in the audit log, by cli and the OS user, never with a key or token in them", async (t) => {
  const env = await dataDir();
  const key = JSON.parse((await run(['keys', 'create', '--account', 'acme', '--scope', 'models:read', '--rpm', '5', '--json'], env)).out) as { id: string; key: string };
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
