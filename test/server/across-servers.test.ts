import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import knexFactory, { type Knex } from 'knex';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { callCost, tokenPrice } from '../../lib/cost/price.js';
import { usdOfPico } from '../../lib/picodollars.js';
import { KnexAdminTokenStore } from '../../lib/stores/knex/admin-token-store.js';
import { runCommand } from '../../reference-server/commands/index.js';
import { makePdf } from '../helpers/models-pdf.js';
import { mockProviders, type MockProviders } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';
import { parseMetrics, value } from '../helpers/prometheus.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { minuteAlignedClock, runCli, spawnServer, startServer, tempDataDir, type RunningServer } from '../helpers/server-process.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

// Reference servers that share a deployment's data: what one counts or revokes, every one sees.

// Two reference servers (each with its own pools) on one PostgreSQL database and one Redis, in front of a mock
// OpenAI and Anthropic: the limits, the usage records and the metrics as a deployment has them.
const services = withRedis(withPostgres(test));

interface Setup {
  env: Record<string, string>;
  upstream: MockProviders;
  servers: [RunningServer, RunningServer];
  metricsUrl: string;
  limitedKey: { id: string; key: string };
  plainKey: { id: string; key: string };
  cleanup: Array<() => Promise<unknown>>;
}

let setup: Setup;

// Redis outlives a run: accounts of their own, so that no other run's counts are found there.
const RUN = randomBytes(4).toString('hex');
const LIMITED_ACCOUNT = `acme-limited-${RUN}`;
const PLAIN_ACCOUNT = `acme-plain-${RUN}`;

/** Runs a CLI command in this process, as `koa-model-gateway <args>`; its output parsed as JSON. */
async function cli(env: Record<string, string>, args: string[]): Promise<unknown> {
  const out: string[] = [];
  const code = await runCommand([...args, '--json'], { env, out: (text) => out.push(text), err: () => undefined });
  if (code !== 0) throw new Error(`${args.join(' ')} exited ${code}`);
  return JSON.parse(out.join('\n'));
}

services.before(async () => {
  const cleanup: Setup['cleanup'] = [];
  const [upstream, data, database] = await Promise.all([mockProviders(), tempDataDir(), throwawayPostgres()]);
  cleanup.push(
    () => upstream.close(),
    () => data.remove(),
    () => database.drop(),
  );
  const config = join(data.dir, 'gateway.json');
  await writeFile(
    config,
    JSON.stringify({
      providers: [
        { id: 'mock-openai', kind: 'openai', baseURL: `${upstream.url}/v1` },
        { id: 'mock-anthropic', kind: 'anthropic', baseURL: upstream.url },
      ],
      models: [
        { id: 'gpt-mock', provider: 'mock-openai', upstreamModel: 'gpt-upstream-1', price: GPT_PRICE },
        { id: 'claude-mock', provider: 'mock-anthropic', upstreamModel: 'claude-upstream-1', price: CLAUDE_PRICE },
      ],
      modelLimits: { tokensPerDay: 1_000_000 },
      limits: { createsPerMinute: 1 },
      sweep: { intervalSeconds: 0 },
    }),
  );
  const env = { DATA_DIR: data.dir, DATABASE_URL: database.url, REDIS_URL, GATEWAY_CONFIG: config };
  const limitedKey = (await cli(env, ['keys', 'create', '--account', LIMITED_ACCOUNT, '--rpm', '10'])) as Setup['limitedKey'];
  const plainKey = (await cli(env, ['keys', 'create', '--account', PLAIN_ACCOUNT])) as Setup['plainKey'];
  // The two servers count calls per minute of one clock, which starts a minute: no test straddles two.
  const nowMs = minuteAlignedClock();
  const servers = await Promise.all([startServer({ ...env, METRICS_PORT: '0' }, { nowMs }), startServer(env, { nowMs })]);
  cleanup.push(() => Promise.all(servers.map((server) => server.stop())));
  const metricsUrl = servers[0].logs.find((line) => line.msg === 'metrics listening')?.url;
  if (typeof metricsUrl !== 'string') throw new Error('the metrics listener did not log its address');
  setup = { env, upstream, servers, metricsUrl, limitedKey, plainKey, cleanup };
});

services.after.always(async () => {
  for (const step of (setup?.cleanup ?? []).reverse()) await step();
});

const chat = (server: RunningServer, key: string, body: Record<string, unknown> = {}) =>
  fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-mock', messages: [{ role: 'user', content: 'hi' }], ...body }),
  });

const messages = (server: RunningServer, key: string, body: Record<string, unknown> = {}) =>
  fetch(`${server.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'claude-mock', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], ...body }),
  });

const sum = (values: number[]) => values.reduce((total, each) => total + each, 0);

// USD per million tokens: a micro-dollar per token at 1.
const GPT_PRICE = { input: 2, output: 8 };
const CLAUDE_PRICE = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };
/** What the calls cost in USD, from the usage the upstream reported (the mock's Messages answers: 1 cache write and 2 cache reads among the input). */
const costOf = (model: string, calls: Array<{ input: number; output: number }>) =>
  usdOfPico(
    sum(
      calls.map(({ input, output }) =>
        model === 'claude-mock'
          ? callCost(tokenPrice(CLAUDE_PRICE), { inputTokens: input, outputTokens: output, cacheWriteTokens: 1, cacheReadTokens: 2 })
          : callCost(tokenPrice(GPT_PRICE), { inputTokens: input, outputTokens: output }),
      ),
    ),
  );

// What the first server answered, for its metrics: chat 429s, and the tokens of its chat answers.
const servedByFirst = { refusals: 0, inputTokens: 0, upstreamCalls: 0 };

services.serial(
  '50 parallel chat calls by a key with --rpm 10, across two servers: exactly 10 reach the upstream; the refused carry the headers',
  async (t) => {
    const { servers, limitedKey, upstream } = setup;
    const answers = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const first = i % 2 === 0;
        const response = await chat(servers[first ? 0 : 1], limitedKey.key);
        return { first, response, body: (await response.json()) as { usage?: { prompt_tokens: number } } };
      }),
    );
    const passed = answers.filter(({ response }) => response.status === 200);
    const refused = answers.filter(({ response }) => response.status === 429);
    const statuses: Record<number, number> = {};
    for (const { response } of answers) statuses[response.status] = (statuses[response.status] ?? 0) + 1;
    t.deepEqual(statuses, { 200: 10, 429: 40 }, JSON.stringify(answers.filter(({ response }) => response.status >= 500).map(({ body }) => body)));
    t.is(upstream.calls.length, 10);
    for (const { response } of passed) {
      t.is(response.headers.get('x-ratelimit-limit-requests'), '10');
      t.is(response.headers.get('x-ratelimit-limit-tokens'), '1000000', "the config's modelLimits apply to every key");
    }
    t.deepEqual(
      passed.map(({ response }) => response.headers.get('x-ratelimit-remaining-requests')).sort((a, b) => Number(a) - Number(b)),
      ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'],
    );
    const eleventh = refused[0];
    if (!eleventh) return;
    t.deepEqual(eleventh.body, {
      error: { message: 'Rate limit exceeded: requests per minute', type: 'rate_limit_error', param: null, code: 'rate_limit_exceeded' },
    });
    const retryAfter = Number(eleventh.response.headers.get('retry-after'));
    t.true(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `retry-after: ${retryAfter}`);
    t.is(eleventh.response.headers.get('x-ratelimit-limit-requests'), '10');
    t.is(eleventh.response.headers.get('x-ratelimit-remaining-requests'), '0');
    t.regex(eleventh.response.headers.get('x-ratelimit-reset-requests') ?? '', /^(\d+ms|\d+(\.\d+)?s)$/);

    servedByFirst.refusals = refused.filter(({ first }) => first).length;
    const firstPassed = passed.filter(({ first }) => first);
    servedByFirst.upstreamCalls = firstPassed.length;
    servedByFirst.inputTokens = sum(firstPassed.map(({ body }) => body.usage?.prompt_tokens ?? 0));
  },
);

// The usage of each call of the sequence below, as the upstream reported it.
const sequence: Array<{ model: string; input: number; output: number }> = [];

services.serial(
  'metrics scraped from the METRICS_PORT listener: requests by route, upstream times, tokens, limit refusals, uploaded bytes; cost by model and account; no key or file in them',
  async (t) => {
    const { servers, plainKey, upstream, metricsUrl } = setup;
    const [first] = servers;
    for (const call of [
      () => chat(first, plainKey.key),
      () => chat(first, plainKey.key, { stream: true }),
      () => messages(first, plainKey.key),
      () => messages(first, plainKey.key, { stream: true }),
    ]) {
      const response = await call();
      t.is(response.status, 200);
      await response.text();
      const { path, usage } = upstream.calls.at(-1) ?? { path: '', usage: { input: 0, output: 0 } };
      sequence.push({ model: path === '/v1/messages' ? 'claude-mock' : 'gpt-mock', ...usage });
    }
    const pdf = makePdf(1);
    const upload = async () => {
      const form = new FormData();
      form.append('purpose', 'user_data');
      form.append('file', new Blob([pdf], { type: 'application/pdf' }), 'report.pdf');
      return fetch(`${first.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${plainKey.key}` }, body: form });
    };
    const created = (await (await upload()).json()) as { id: string };
    t.is((await upload()).status, 429, 'one creation per minute, as configured');

    const response = await fetch(metricsUrl);
    t.is(response.status, 200);
    t.regex(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    const samples = parseMetrics(text);
    const gptInput = servedByFirst.inputTokens + sum(sequence.filter(({ model }) => model === 'gpt-mock').map(({ input }) => input));
    t.is(value(samples, 'kmg_model_tokens_total', { model: 'gpt-mock', direction: 'input' }), gptInput);
    t.is(
      value(samples, 'kmg_model_tokens_total', { model: 'claude-mock', direction: 'output' }),
      sum(sequence.filter(({ model }) => model === 'claude-mock').map(({ output }) => output)),
    );
    t.is(value(samples, 'kmg_limit_refusals_total', { kind: 'requests' }), servedByFirst.refusals);
    t.is(value(samples, 'kmg_http_requests_total', { route: 'POST /v1/chat/completions', status: '429' }), servedByFirst.refusals);
    t.is(value(samples, 'kmg_http_requests_total', { route: 'POST /v1/messages', status: '200' }), 2);
    t.is(value(samples, 'kmg_upstream_duration_seconds_count', { provider: 'mock-openai', model: 'gpt-mock' }), servedByFirst.upstreamCalls + 2);
    t.is(value(samples, 'kmg_upstream_time_to_first_byte_seconds_count', { provider: 'mock-anthropic', model: 'claude-mock' }), 2);
    t.is(value(samples, 'kmg_gateway_overhead_seconds_count', { route: 'POST /v1/messages' }), 2);
    t.is(value(samples, 'kmg_uploaded_bytes_total'), pdf.length);
    t.is(value(samples, 'kmg_limit_refusals_total', { kind: 'file_creations' }), 1);
    t.is(value(samples, 'kmg_http_requests_total', { route: 'POST /v1/files', status: '200' }), 1);
    for (const secret of [plainKey.id, plainKey.key, created.id, 'report.pdf']) t.false(text.includes(secret), secret);
    // Streamed and whole answers alike, cache reads and writes at their prices.
    const claudeCost = value(samples, 'kmg_cost_usd_total', { model: 'claude-mock', account: PLAIN_ACCOUNT }) ?? 0;
    t.true(
      Math.abs(
        claudeCost -
          costOf(
            'claude-mock',
            sequence.filter(({ model }) => model === 'claude-mock'),
          ),
      ) < 1e-12,
      String(claudeCost),
    );
    // The account only as the cost's label.
    t.true(
      text
        .split('\n')
        .filter((line) => line.includes(RUN))
        .every((line) => line.startsWith('kmg_cost_usd_total{')),
    );
  },
);

services.serial('usage --json after the servers stop: every call, refused ones included, with the upstream’s usage', async (t) => {
  const { servers, env, limitedKey, upstream } = setup;
  // SIGTERM writes the records still waiting.
  t.deepEqual(await Promise.all(servers.map((server) => server.stop())), [0, 0]);
  const limitedCalls = upstream.calls.slice(0, 10);
  const limitedTotals = {
    requests: 50,
    answered: 10,
    refused: 40,
    input_tokens: sum(limitedCalls.map((call) => call.usage.input)),
    output_tokens: sum(limitedCalls.map((call) => call.usage.output)),
    cost_usd: costOf(
      'gpt-mock',
      limitedCalls.map((call) => call.usage),
    ),
    cache_hits: 0,
    cost_saved_usd: 0,
  };
  t.deepEqual(await cli(env, ['usage', '--key', limitedKey.id]), {
    by: 'day',
    totals: limitedTotals,
    rows: [{ day: new Date().toISOString().slice(0, 10), ...limitedTotals }],
  });
  const byModel = (model: string) => {
    const calls = sequence.filter((call) => call.model === model);
    return {
      model,
      requests: calls.length,
      answered: calls.length,
      refused: 0,
      input_tokens: sum(calls.map((call) => call.input)),
      output_tokens: sum(calls.map((call) => call.output)),
      cost_usd: costOf(model, calls),
      cache_hits: 0,
      cost_saved_usd: 0,
    };
  };
  const report = (await cli(env, ['usage', '--account', PLAIN_ACCOUNT, '--by', 'model'])) as { rows: unknown[] };
  t.deepEqual(report.rows, [byModel('claude-mock'), byModel('gpt-mock')]);
});

// A key revoked or rotated in one server process, or by the CLI, is refused by every process
// (this test's, and one of its own) within a second, while each process keeps its key cache for
// 30 s (`keyCacheSeconds`; 1 by default): a cache that is not told would accept the key long after.

const LIMIT_MS = 1000;

interface Deployment {
  env: Record<string, string>;
  /** Knex settings for the servers' database, to make the admin token there. */
  database: Knex.Config;
  cleanup(): Promise<void>;
}

/** An admin token made in the servers' database (the CLI's own command is tested in test/server/cli.test.ts). */
async function adminToken(database: Knex.Config): Promise<string> {
  const knex = knexFactory(database);
  try {
    return (await createAdminToken(new KnexAdminTokenStore(knex), { prefix: 'kmg' })).token;
  } finally {
    await knex.destroy();
  }
}

const status = async (server: RunningServer, key: string) => (await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;

/** Asserts that every server refuses `key` within LIMIT_MS of `since` (asking until it does, or that time has passed). */
async function refusedWithin(t: ExecutionContext, servers: RunningServer[], key: string, since: number): Promise<void> {
  const refused = await Promise.all(
    servers.map(
      async (server) =>
        (await until(
          () => status(server, key),
          (code) => code === 401 || performance.now() - since > LIMIT_MS,
        )) === 401,
    ),
  );
  t.deepEqual(
    refused,
    servers.map(() => true),
    `refused by each server within ${LIMIT_MS} ms`,
  );
}

async function twoServers(t: ExecutionContext, deployment: Deployment) {
  t.teardown(() => deployment.cleanup());
  const servers = await Promise.all([startServer(deployment.env), spawnServer(deployment.env)]);
  t.teardown(() => Promise.all(servers.map((server) => server.stop())));
  const token = await adminToken(deployment.database);
  const admin = async (server: RunningServer, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${server.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as { id: string; key: string };
  };
  /** A new key, already accepted (and so cached) by both servers. */
  const cachedKey = async () => {
    const created = await admin(servers[1] as RunningServer, 'POST', '/keys', { account: 'acme' });
    for (const server of servers) t.is(await status(server, created.key), 200);
    return created;
  };
  return { servers, admin, cachedKey };
}

/** A `GATEWAY_CONFIG` in `dir` whose key cache outlives the bound by far. */
async function longKeyCache(dir: string): Promise<string> {
  const file = join(dir, 'gateway.json');
  await writeFile(file, JSON.stringify({ keyCacheSeconds: 30 }));
  return file;
}

async function revocationAcrossProcesses(t: ExecutionContext, deployment: Deployment) {
  const { servers, admin, cachedKey } = await twoServers(t, deployment);
  const [first] = servers as [RunningServer, RunningServer];

  const revoked = await cachedKey();
  await admin(first, 'POST', `/keys/${revoked.id}/revoke`);
  await refusedWithin(t, servers, revoked.key, performance.now());

  const rotated = await cachedKey();
  const replacement = await admin(first, 'POST', `/keys/${rotated.id}/rotate`, { grace_seconds: 0 });
  await refusedWithin(t, servers, rotated.key, performance.now());
  for (const server of servers) t.is(await status(server, replacement.key), 200);

  const byCli = await cachedKey();
  const cli = await runCli(['keys', 'revoke', byCli.id], deployment.env);
  t.is(cli.code, 0, cli.stderr);
  t.is(cli.stderr, '');
  await refusedWithin(t, servers, byCli.key, performance.now());
}

test('SQLite: two server processes refuse a key revoked or rotated in one of them, or by the CLI, within a second', async (t) => {
  const data = await tempDataDir();
  const dataDir = join(data.dir, 'data');
  await revocationAcrossProcesses(t, {
    env: { DATA_DIR: dataDir, GATEWAY_CONFIG: await longKeyCache(data.dir) },
    database: { client: 'better-sqlite3', connection: { filename: join(dataDir, 'gateway.sqlite') }, useNullAsDefault: true },
    cleanup: () => data.remove(),
  });
});

withRedis(withPostgres(test))(
  'PostgreSQL + Redis: two server processes refuse a key revoked or rotated in one of them, or by the CLI, within a second',
  async (t) => {
    const [data, database] = await Promise.all([tempDataDir(), throwawayPostgres()]);
    await revocationAcrossProcesses(t, {
      env: { DATA_DIR: data.dir, DATABASE_URL: database.url, REDIS_URL, GATEWAY_CONFIG: await longKeyCache(data.dir) },
      database: { client: 'pg', connection: database.url },
      async cleanup() {
        await database.drop();
        await data.remove();
      },
    });
  },
);
