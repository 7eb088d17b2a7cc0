import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import test, { type TestFn } from 'ava';
import { runCommand } from '../../reference-server/commands/index.js';
import { makePdf } from '../helpers/models-pdf.js';
import { until } from '../helpers/poll.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { createKey, minuteAlignedClock, spawnServer, startServer, tempDataDir, type RunningServer } from '../helpers/server-process.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';
import { webhookReceiver } from '../helpers/webhook-receiver.js';

// The reference server's limits: those of the config file on files, and budgets in money.

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A data dir with the config file `config`: the environment of a server on it. */
async function configuredEnv(config: unknown) {
  const data = await tempDataDir();
  cleanups.push(data.remove);
  const configPath = join(data.dir, 'gateway.json');
  await writeFile(configPath, JSON.stringify(config));
  return { DATA_DIR: data.dir, GATEWAY_CONFIG: configPath };
}

// The creation rate counts per clock minute: on a clock that starts one, no test straddles two.
const nowMs = minuteAlignedClock();

async function serve(env: Record<string, string>): Promise<RunningServer> {
  const server = await startServer(env, { nowMs });
  cleanups.push(() => server.stop());
  return server;
}

function upload(server: RunningServer, key: string, pdf: Buffer) {
  const form = new FormData();
  form.set('purpose', 'user_data');
  form.set('file', new Blob([pdf], { type: 'application/pdf' }), 'a.pdf');
  return fetch(`${server.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
}

async function errorOf(response: Response) {
  return ((await response.json()) as { error: { code: string } }).error.code;
}

const newAccount = () => `acct-${randomBytes(4).toString('hex')}`;

test('the limits of the config file replace the spec defaults', async (t) => {
  const env = await configuredEnv({ limits: { createsPerMinute: 2, maxFiles: 1, maxFileBytes: 4096 } });
  const stocked = await createKey(env, ['--account', newAccount()]);
  const rated = await createKey(env, ['--account', newAccount()]);
  const server = await serve(env);
  const pdf = makePdf(1);

  const tooLarge = await upload(server, stocked.key, makePdf(1, 5000));
  t.is(tooLarge.status, 413);
  t.is(await errorOf(tooLarge), 'file_too_large');

  t.is((await upload(server, stocked.key, pdf)).status, 200);
  const full = await upload(server, stocked.key, pdf);
  t.is(full.status, 429);
  t.is(full.headers.get('x-should-retry'), 'false');
  t.is(await errorOf(full), 'storage_quota_exceeded');

  // A delete frees the stock but gives no creation back: the third creation of the minute is refused.
  for (let i = 0; i < 2; i++) {
    const file = (await (await upload(server, rated.key, pdf)).json()) as { id: string };
    await fetch(`${server.url}/v1/files/${file.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${rated.key}` } });
  }
  const third = await upload(server, rated.key, pdf);
  t.is(third.status, 429);
  t.is(await errorOf(third), 'rate_limit_exceeded');
  const retryAfter = Number(third.headers.get('retry-after'));
  t.true(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60);
});

// Budgets in money on the reference server, set from the CLI and the admin API: SQLite with the
// spend in memory (one server), and PostgreSQL with the spend on Redis (two servers sharing them).

// Redis outlives a run: accounts of their own.
const RUN = randomBytes(4).toString('hex');

// The offline echo model at 1,000 USD per million tokens (a millidollar per token): a call's cost is its tokens' count in millidollars.
const CONFIG = {
  models: [
    { id: 'echo-priced', provider: 'echo', price: { input: 1000, output: 1000 } },
    { id: 'mystery', provider: 'echo', upstreamModel: 'no-such-upstream-model' },
  ],
  sweep: { intervalSeconds: 0 },
};

/** Calls in flight at once per server. */
const WORKERS_PER_SERVER = 5;

interface Deployment {
  env: Record<string, string>;
  servers: RunningServer[];
  cleanup(): Promise<void>;
}

/** Stops `servers` and starts as many again on `env`, in place. */
async function restart(servers: RunningServer[], env: Record<string, string>): Promise<void> {
  await Promise.all(servers.map((server) => server.stop()));
  servers.splice(0, servers.length, ...(await Promise.all(servers.map(() => startServer(env)))));
}

async function cli(env: Record<string, string>, args: string[]): Promise<Record<string, unknown>> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCommand([...args, '--json'], { env, out: (text) => out.push(text), err: (text) => err.push(text) });
  if (code !== 0) throw new Error(`${args.join(' ')} exited ${code}: ${err.join('\n')}`);
  return JSON.parse(out.join('\n')) as Record<string, unknown>;
}

const chat = (server: RunningServer, key: string) =>
  fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    // The maximum output bounds the call's reservation (echo answers ~20 words, whatever it says).
    body: JSON.stringify({ model: 'echo-priced', max_tokens: 20, messages: [{ role: 'user', content: 'one two three' }] }),
  });

interface ErrorBody {
  error: { type: string; code: string | null; message: string };
}

/** Runs `calls` chat calls with `WORKERS_PER_SERVER` at a time on each server; the statuses and bodies of the answers. */
async function pooled(servers: RunningServer[], key: string, calls: number) {
  let started = 0;
  const answers: Array<{ status: number; retryAfter: string | null; body: ErrorBody | { usage: unknown } }> = [];
  const worker = async (server: RunningServer) => {
    while (started < calls) {
      started += 1;
      const response = await chat(server, key);
      answers.push({ status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as ErrorBody });
    }
  };
  await Promise.all(servers.flatMap((server) => Array.from({ length: WORKERS_PER_SERVER }, () => worker(server))));
  return answers;
}

const ALERT_SECRET = 'alert-secret';

interface AlertEntry {
  action: string;
  fields: string[];
}

/** Budgets on a deployment that `open` starts, with `extraEnv` beside its own environment. */
function budgetSuite(suiteTest: TestFn, name: string, open: (extraEnv?: Record<string, string>) => Promise<Deployment>): void {
  suiteTest.serial(
    `${name}: soft budgets' thresholds crossed by model calls send each signed webhook once, whichever server sees it; a soft budget never refuses`,
    async (t) => {
      const hook = await webhookReceiver(ALERT_SECRET);
      t.teardown(hook.close);
      const deployment = await open({ ALERT_WEBHOOK_URL: hook.url, ALERT_WEBHOOK_SECRET: ALERT_SECRET });
      t.teardown(() => deployment.cleanup());
      const { env, servers } = deployment;
      const first = servers[0] as RunningServer;
      const probeKey = (await cli(env, ['keys', 'create', '--account', `probe-${RUN}`])).key as string;
      const probe = (await (await chat(first, probeKey)).json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
      // Four calls' worth: each call costs `tokens` millidollars.
      const budget = ((probe.usage.prompt_tokens + probe.usage.completion_tokens) * 4) / 1000;
      const account = `alerts-${name}-${RUN}`;
      const key = (await cli(env, [
        'keys',
        'create',
        '--account',
        account,
        '--cost-per-day',
        String(budget),
        '--cost-soft',
        'true',
        '--cost-alert-thresholds',
        '25,50,100',
      ])) as { id: string; key: string };
      const { token } = (await cli(env, ['admin-tokens', 'create'])) as { token: string };
      const admin = (method: string, path: string, body?: unknown) =>
        fetch(`${first.url}/admin/v1${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const put = await admin('PUT', `/accounts/${encodeURIComponent(account)}/limits`, { costPerDay: budget, costSoft: true, costAlertThresholds: [100] });
      t.is(put.status, 200);

      // Six calls, one after the other, taking turns on the servers: the spend passes both budgets by half, and none is refused.
      for (let call = 0; call < 6; call++) t.is((await chat(servers[call % servers.length] as RunningServer, key.key)).status, 200, `call ${call}`);
      await until(
        async () => hook.received.length,
        (count) => count >= 4,
      );
      // Each delivery is audited once it is made: once four are, every alert the calls caused has been sent.
      const audited = await until(
        async () => ((await (await admin('GET', '/audit?action=budget.alert_sent')).json()) as { data: AlertEntry[] }).data,
        (entries) => entries.length >= 4,
      );
      t.deepEqual(
        audited.map((entry) => entry.fields[2]),
        ['delivered', 'delivered', 'delivered', 'delivered'],
      );
      t.is(hook.received.length, 4, 'each threshold once, though two servers may each see it crossed');
      t.true(hook.received.every(({ signed }) => signed));
      const sent = hook.received.map(({ body }) => body).sort((a, b) => a.scope.localeCompare(b.scope) || a.threshold - b.threshold);
      const common = { type: 'budget.threshold', budget_usd: budget, period: 'day' };
      t.like(sent, [
        { ...common, scope: 'account', id: account, threshold: 100 },
        { ...common, scope: 'key', id: key.id, threshold: 25 },
        { ...common, scope: 'key', id: key.id, threshold: 50 },
        { ...common, scope: 'key', id: key.id, threshold: 100 },
      ]);
      for (const alert of sent) t.true(alert.spent_usd * 100 >= budget * alert.threshold - 1e-9, `${alert.spent_usd} reached ${alert.threshold}%`);
    },
  );

  suiteTest.serial(`${name}: a key's daily budget refuses calls whose maximum cost no longer fits, across servers, never overshooting`, async (t) => {
    const deployment = await open();
    t.teardown(() => deployment.cleanup());
    const { env, servers } = deployment;
    const first = servers[0] as RunningServer;
    const probeKey = (await cli(env, ['keys', 'create', '--account', `probe-${RUN}`])).key as string;
    const probe = (await (await chat(first, probeKey)).json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const tokens = probe.usage.prompt_tokens + probe.usage.completion_tokens;
    // Ten calls' worth: each call costs `tokens` millidollars.
    const budget = (tokens * 10) / 1000;
    const key = (await cli(env, ['keys', 'create', '--account', `budget-${name}-${RUN}`, '--cost-per-day', String(budget)])) as {
      key: string;
      limits: unknown;
    };
    t.like(key.limits, { cost_per_day: budget, cost_per_month: null });

    const answers = await pooled(servers, key.key, 50);
    const passed = answers.filter(({ status }) => status === 200).length;
    // Each call reserves more than it costs (~5 calls' worth): some room is left unspent, none overspent.
    t.true(passed >= 1 && passed <= 10, `${passed} calls passed a budget of 10 calls' worth`);
    const refused = answers.filter(({ status }) => status !== 200);
    t.is(refused.length, 50 - passed);
    // On the real clock, a bound; the test on a fixed clock below checks the exact value.
    const midnight = new Date().setUTCHours(24, 0, 0, 0);
    for (const { status, retryAfter, body } of refused) {
      t.is(status, 429);
      t.like(body, { error: { type: 'rate_limit_error', code: 'budget_exceeded', param: null } });
      t.true((body as ErrorBody).error.message.startsWith(`Budget exceeded: the key's daily budget of ${budget} USD `), (body as ErrorBody).error.message);
      const seconds = Number(retryAfter);
      t.true(seconds >= 1 && seconds <= Math.ceil((midnight - Date.now()) / 1000) + 5, `retry-after ${retryAfter} runs to UTC midnight`);
    }
    // A restart forgets nothing: the spend is on Redis, or read back from the usage records.
    await restart(servers, env);
    for (const server of servers) t.is((await chat(server, key.key)).status, 429);
    // Every endpoint: Messages answers in Shape B. Their maxima (1000 tokens; Responses, the default 4096) never fit.
    for (const server of servers) {
      t.is((await chat(server, key.key)).status, 429);
      const messages = await fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': key.key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'echo-priced', max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }] }),
      });
      t.is(messages.status, 429);
      t.like(await messages.json(), { type: 'error', error: { type: 'rate_limit_error' } });
      const responses = await fetch(`${server.url}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo-priced', input: 'hi' }),
      });
      t.is(responses.status, 429);
      t.like(await responses.json(), { error: { code: 'budget_exceeded' } });
    }
  });

  suiteTest.serial(`${name}: a budget set on a key that has spent already counts what it spent before, and its replacement shares it`, async (t) => {
    const deployment = await open();
    t.teardown(() => deployment.cleanup());
    const { env, servers } = deployment;
    const key = (await cli(env, ['keys', 'create', '--account', `later-${name}-${RUN}`])) as { id: string; key: string };
    let spentMillidollars = 0;
    // On one server: another's records of its last second may still be queued when the spend is first read.
    const first = servers[0] as RunningServer;
    for (let call = 0; call < 3; call++) {
      const answer = (await (await chat(first, key.key)).json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
      spentMillidollars += answer.usage.prompt_tokens + answer.usage.completion_tokens;
    }
    const { token } = (await cli(env, ['admin-tokens', 'create'])) as { token: string };
    const patched = await fetch(`${first.url}/admin/v1/keys/${key.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ limits: { cost_per_day: spentMillidollars / 1000 } }),
    });
    t.is(patched.status, 200);
    // The change reaches every server within the key cache's second. Polled with a model that costs
    // nothing, so that no call made now counts: only the spend before the budget can reach it.
    const free = (server: RunningServer, secret = key.key) =>
      fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'mystery', messages: [{ role: 'user', content: 'hi' }] }),
      }).then((response) => response.status);
    for (const server of servers)
      t.is(
        await until(
          () => free(server),
          (status) => status === 429,
        ),
        429,
      );
    // A rotation resets no spend: the replacement spends against the same budget, the old key too in its grace.
    const rotated = await fetch(`${first.url}/admin/v1/keys/${key.id}/rotate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ grace_seconds: 3600 }),
    });
    t.is(rotated.status, 201);
    const replacement = (await rotated.json()) as { key: string };
    for (const server of servers) {
      t.is(await free(server, replacement.key), 429);
      t.is(await free(server, key.key), 429);
    }
  });

  suiteTest.serial(`${name}: an account's budget covers all its keys, set and removed from the CLI and the admin API`, async (t) => {
    const deployment = await open();
    t.teardown(() => deployment.cleanup());
    const { env, servers } = deployment;
    const [first, last] = [servers[0] as RunningServer, servers.at(-1) as RunningServer];
    const account = `account-${name}-${RUN}`;
    const [one, two, elsewhere] = [
      (await cli(env, ['keys', 'create', '--account', account])).key as string,
      (await cli(env, ['keys', 'create', '--account', account])).key as string,
      (await cli(env, ['keys', 'create', '--account', `elsewhere-${RUN}`])).key as string,
    ];
    const probe = (await (await chat(first, elsewhere)).json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    // Ten calls' worth: each reserves ~5 calls' worth, so that a few pass.
    const budget = ((probe.usage.prompt_tokens + probe.usage.completion_tokens) * 10) / 1000;
    t.deepEqual(await cli(env, ['accounts', 'set-limits', account, '--cost-per-month', String(budget)]), {
      account,
      costPerDay: null,
      costPerMonth: budget,
      costSoft: false,
      costAlertThresholds: null,
    });

    // The CLI wrote the database: each server reads it within a second.
    t.is(
      await until(
        () => chat(first, one).then((r) => r.status),
        (status) => status === 200,
      ),
      200,
    );
    t.is((await chat(last, two)).status, 200);
    const refused = await until(
      () => chat(last, one),
      (response) => response.status === 429,
      { attempts: 50 },
    );
    t.is(refused.status, 429);
    t.true(((await refused.json()) as ErrorBody).error.message.startsWith(`Budget exceeded: the account's monthly budget of ${budget} USD `));
    t.is((await chat(first, two)).status, 429, "the account's other key too");
    t.is((await chat(first, elsewhere)).status, 200, 'another account is not concerned');

    const { token } = (await cli(env, ['admin-tokens', 'create'])) as { token: string };
    const admin = (method: string, path: string, body?: unknown) =>
      fetch(`${first.url}/admin/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    // The admin API reads the usage records, written a moment after the calls.
    const limits = await until(
      async () => (await admin('GET', `/accounts/${account}/limits`)).json() as Promise<{ spent: { day: number; month: number } }>,
      (body) => body.spent.month > 0,
    );
    t.like(limits, { object: 'account_limits', account, costPerDay: null, costPerMonth: budget });
    // Never overshot.
    t.true(limits.spent.month > 0 && limits.spent.month <= budget + 1e-9, String(limits.spent.month));
    t.is(limits.spent.day, limits.spent.month);
    const bad = await admin('PUT', `/accounts/${account}/limits`, { costPerMonth: -1 });
    t.is(bad.status, 400);
    t.is(((await bad.json()) as ErrorBody).error.code, 'invalid_costPerMonth');
    const removed = await admin('PUT', `/accounts/${account}/limits`, { costPerMonth: null, costPerDay: budget * 10 });
    t.like(await removed.json(), { costPerDay: budget * 10, costPerMonth: null });
    t.is(
      await until(
        () => chat(last, one).then((r) => r.status),
        (status) => status === 200,
      ),
      200,
    );

    // A model with no known price costs 0, says so, and was named at start-up.
    const models = (await (await admin('GET', '/models')).json()) as { data: Array<{ id: string; price: unknown }> };
    t.deepEqual(
      models.data.map(({ id, price }) => [id, price]),
      [
        ['echo-priced', { input: 1000, output: 1000, cache_read: 1000, cache_write: 1000 }],
        ['mystery', null],
      ],
    );
    for (const server of servers)
      t.deepEqual(
        server.logs.filter((line) => line.msg.startsWith('no price known')).map((line) => line.models),
        [['mystery']],
      );
  });
}

async function withConfig(env: Record<string, string>, dir: string): Promise<Record<string, string>> {
  const path = join(dir, 'gateway.json');
  await writeFile(path, JSON.stringify(CONFIG));
  return { ...env, GATEWAY_CONFIG: path };
}

budgetSuite(test, 'sqlite+memory', async (extraEnv = {}) => {
  const data = await tempDataDir();
  const env = await withConfig({ DATA_DIR: data.dir, ...extraEnv }, data.dir);
  const servers = [await startServer(env)];
  return {
    env,
    servers,
    async cleanup() {
      await Promise.all(servers.map((server) => server.stop()));
      await data.remove();
    },
  };
});

budgetSuite(withRedis(withPostgres(test)), 'postgres+redis', async (extraEnv = {}) => {
  const [data, database] = await Promise.all([tempDataDir(), throwawayPostgres()]);
  const env = await withConfig({ DATA_DIR: data.dir, DATABASE_URL: database.url, REDIS_URL, ...extraEnv }, data.dir);
  const servers = await Promise.all([startServer(env), startServer(env)]);
  return {
    env,
    servers,
    async cleanup() {
      await Promise.all(servers.map((server) => server.stop()));
      await database.drop();
      await data.remove();
    },
  };
});

// An instance killed (SIGKILL) with a call under way releases nothing: its reservation, on Redis,
// lapses after budgets.reservationTtlSeconds, and another instance then sees the budget whole.
const RESERVATION_TTL_SECONDS = 5;

withRedis(withPostgres(test))(
  'postgres+redis: an instance killed with a call under way holds its reservation no longer than budgets.reservationTtlSeconds',
  async (t) => {
    // An upstream that takes the call and never answers: the call is under way until its instance dies.
    let received = 0;
    const upstream = createServer(() => {
      received += 1;
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    t.teardown(() => {
      upstream.closeAllConnections();
      upstream.close();
    });
    const [data, database] = await Promise.all([tempDataDir(), throwawayPostgres()]);
    cleanups.push(database.drop, data.remove);
    const config = join(data.dir, 'gateway.json');
    await writeFile(
      config,
      JSON.stringify({
        providers: [{ id: 'silent', kind: 'openai', baseURL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1` }],
        models: [{ id: 'silent-model', provider: 'silent', price: { input: 1, output: 1 } }],
        budgets: { reservationTtlSeconds: RESERVATION_TTL_SECONDS },
        sweep: { intervalSeconds: 0 },
      }),
    );
    const env = { DATA_DIR: data.dir, DATABASE_URL: database.url, REDIS_URL, GATEWAY_CONFIG: config };
    const key = (await cli(env, ['keys', 'create', '--account', `killed-${RUN}`, '--cost-per-day', '10'])) as { id: string; key: string };
    const { token } = (await cli(env, ['admin-tokens', 'create'])) as { token: string };
    const [doomed, survivor] = await Promise.all([spawnServer(env), serve(env)]);
    cleanups.push(async () => doomed.child.kill('SIGKILL'));
    const reserved = async () =>
      (
        (await (await fetch(`${survivor.url}/admin/v1/keys/${key.id}/spend`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
          reserved: number;
        }
      ).reserved;

    const call = fetch(`${doomed.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'silent-model', max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }] }),
    }).catch(() => undefined);
    await until(
      async () => received,
      (count) => count > 0,
    );
    // 1,000 output tokens at 1 USD per million, and the body's bytes as input: a millidollar and a little more.
    const held = await reserved();
    t.true(held > 0.001 && held < 0.002, `reserved ${held}`);
    doomed.child.kill('SIGKILL');
    const killedAt = performance.now();
    await doomed.exited;
    await call;
    t.is(await until(reserved, (usd) => usd === 0, { intervalMs: 100, attempts: 300 }), 0);
    const seconds = (performance.now() - killedAt) / 1000;
    // The reservation was made before the kill: it lapses at most the TTL after it (the rest is room for a busy machine), not the default 15 minutes.
    t.true(seconds <= RESERVATION_TTL_SECONDS + 10, `released ${seconds.toFixed(1)} s after the kill`);
  },
);

// 2030-11-25T10:00:00.500Z: 13 h 59 min 59.5 s before UTC midnight, and 5 days more before the month
// ends. retry-after is in whole seconds, rounded up: the client never comes back before the end.
const FIXED = Date.UTC(2030, 10, 25, 10, 0, 0, 500);

test("a reached budget's retry-after runs to its period's end: the next UTC midnight for a day, the first of the next UTC month for a month", async (t) => {
  const data = await tempDataDir();
  cleanups.push(data.remove);
  const env = await withConfig({ DATA_DIR: data.dir }, data.dir);
  // A call reserves ~0.115 USD and costs ~0.02: a few calls leave too little for the next.
  const daily = (await cli(env, ['keys', 'create', '--account', `daily-${RUN}`, '--cost-per-day', '0.2'])).key as string;
  const monthly = (await cli(env, ['keys', 'create', '--account', `monthly-${RUN}`, '--cost-per-month', '0.2'])).key as string;
  const server = await startServer(env, { nowMs: () => FIXED });
  cleanups.push(() => server.stop());
  for (const [key, period, seconds] of [
    [daily, 'daily', 50_400],
    [monthly, 'monthly', 5 * 86_400 + 50_400],
  ] as const) {
    t.is((await chat(server, key)).status, 200, period);
    const refused = await until(
      () => chat(server, key),
      (response) => response.status === 429,
    );
    const { error } = (await refused.json()) as ErrorBody;
    t.is(error.code, 'budget_exceeded');
    t.true(error.message.startsWith(`Budget exceeded: the key's ${period} budget of 0.2 USD has `), error.message);
    t.is(refused.headers.get('retry-after'), String(seconds), period);
  }
});
