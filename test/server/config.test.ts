import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import test from 'ava';
import { providerRegistry } from '../../lib/models/providers/registry.js';
import { parseS3Settings } from '../../reference-server/blob-config.js';
import { ConfigError } from '../../reference-server/config-error.js';
import { configuredMcpUpstreams } from '../../reference-server/mcp-config.js';
import { configuredProviders, loadConfig, loadConfigWithModules, parseDatabaseUrl, parseGatewayConfig } from '../../reference-server/config.js';
import { SPEC_LIMITS } from '../helpers/spec-limits.js';
import { createKey, ROOT, startServer, tempDataDir } from '../helpers/server-process.js';

// The reference server's settings: the environment, the config file, the bucket of BLOB_URL, and
// the provider kinds of the modules the config file names.

test('the defaults: 127.0.0.1:8080, everything under ./data, SQLite, limits in memory, the echo catalog', (t) => {
  const config = loadConfig({});
  t.like(config, {
    host: '127.0.0.1',
    port: 8080,
    dataDir: resolve('data'),
    filesDir: resolve('data/files'),
    database: { client: 'sqlite', filename: resolve('data/gateway.sqlite') },
    redisUrl: null,
    logLevel: 'info',
    shutdownGraceSeconds: 30,
    usageRetention: { recordsDays: 30, rollupsDays: 400 },
  });
  t.deepEqual(config.gateway.limits, SPEC_LIMITS);
  t.is(config.gateway.keyPrefix, 'kmg');
  t.is(config.gateway.keyCacheSeconds, 1, 'a revoked key is refused within 1 s by default (decisions.md)');
  t.deepEqual(config.gateway.providers, [{ id: 'echo', kind: 'echo' }]);
  t.deepEqual(
    config.gateway.models.map((model) => model.id),
    ['echo-1', 'echo-2', 'echo-embed-1'],
  );
  t.true(config.gateway.sweep.intervalSeconds > 0, 'the sweep is on by default');
});

test('DATA_DIR and FILES_DIR place the data', (t) => {
  t.like(loadConfig({ DATA_DIR: '/srv/gw' }), { filesDir: '/srv/gw/files', database: { filename: '/srv/gw/gateway.sqlite' } });
  t.like(loadConfig({ DATA_DIR: '/srv/gw', FILES_DIR: '/mnt/blobs' }), { filesDir: '/mnt/blobs' });
});

test('DATABASE_URL selects the database', (t) => {
  t.deepEqual(parseDatabaseUrl('sqlite:./x.db', '/d'), { client: 'sqlite', filename: resolve('x.db') });
  t.deepEqual(parseDatabaseUrl('sqlite:///var/lib/x.db', '/d'), { client: 'sqlite', filename: '/var/lib/x.db' });
  t.deepEqual(parseDatabaseUrl('postgresql://u:pw@db.internal:5433/gateway?sslmode=require', '/d'), {
    client: 'pg',
    connectionString: 'postgresql://u:pw@db.internal:5433/gateway?sslmode=require',
    display: 'postgres://db.internal:5433/gateway',
  });
  t.throws(() => parseDatabaseUrl('sqlite:', '/d'), { instanceOf: ConfigError });
  t.throws(() => parseDatabaseUrl('mysql://u:pw@h/x', '/d'), { instanceOf: ConfigError, message: /got 'mysql:'/ });
  t.throws(() => parseDatabaseUrl('postgres://user:pa ss@/x', '/d'), { instanceOf: ConfigError, message: 'DATABASE_URL is not a valid postgres:// URL' });
});

test('the config file: limits per field, a catalog of its own, the credential named, not read', (t) => {
  const config = parseGatewayConfig(
    {
      keyPrefix: 'acme',
      limits: { maxFiles: 5 },
      providers: [{ id: 'openai', kind: 'openai', apiKeyEnv: 'KMG_UNSET_VARIABLE' }],
      models: [{ id: 'gpt', provider: 'openai', upstreamModel: 'gpt-4.1-mini', created: 1 }],
    },
    'test',
  );
  t.is(config.keyPrefix, 'acme');
  t.deepEqual(config.limits, { ...SPEC_LIMITS, maxFiles: 5 });
  t.deepEqual(config.providers, [
    { id: 'openai', kind: 'openai', apiKeyEnv: 'KMG_UNSET_VARIABLE' },
    { id: 'echo', kind: 'echo' },
  ]);
  t.deepEqual(
    parseGatewayConfig({ providers: [{ id: 'openai', kind: 'openai' }] }, 'test').models,
    [],
    'a file with providers and no models has no models, not the default echo ones',
  );
  t.is(parseGatewayConfig({ sweep: { intervalSeconds: 0 } }, 'test').sweep.intervalSeconds, 0);
});

test('modelLimits: unlimited by default; each field a positive integer, absent ones unlimited', (t) => {
  t.deepEqual(parseGatewayConfig({}, 'test').modelLimits, {});
  t.deepEqual(parseGatewayConfig({ modelLimits: { requestsPerMinute: 60, tokensPerDay: 1_000_000 } }, 'test').modelLimits, {
    requestsPerMinute: 60,
    tokensPerDay: 1_000_000,
  });
});

test('METRICS_PORT: unset, no metrics listener; a port, or 0 for any free one', (t) => {
  t.is(loadConfig({}).metricsPort, null);
  t.is(loadConfig({ METRICS_PORT: '9464' }).metricsPort, 9464);
  t.is(loadConfig({ METRICS_PORT: '0' }).metricsPort, 0);
});

test('a file that gives only models can use the built-in echo provider', (t) => {
  const config = parseGatewayConfig({ models: [{ id: 'my-echo', provider: 'echo' }] }, 'test');
  t.deepEqual(config.models, [
    {
      id: 'my-echo',
      provider: 'echo',
      upstreamModel: 'my-echo',
      deployments: [{ provider: 'echo', upstreamModel: 'my-echo', weight: 1 }],
      fallbacks: [],
      created: 0,
      display_name: 'my-echo',
      type: 'chat',
    },
  ]);
  t.deepEqual(
    configuredProviders({ gateway: config, env: {}, providerKinds: providerRegistry }).map((provider) => provider.id),
    ['echo'],
  );
});

test('provider credentials are read from the variables apiKeyEnv names only when the providers are made', (t) => {
  const gateway = parseGatewayConfig({ providers: [{ id: 'openai', kind: 'openai', apiKeyEnv: 'OPENAI_KEY' }] }, 'test');
  t.throws(() => configuredProviders({ gateway, env: {}, providerKinds: providerRegistry }), {
    instanceOf: ConfigError,
    message: "provider 'openai': the environment variable OPENAI_KEY (its apiKeyEnv) is not set",
  });
  t.deepEqual(
    configuredProviders({ gateway, env: { OPENAI_KEY: 'sk-1' }, providerKinds: providerRegistry }).map((provider) => provider.id),
    ['openai', 'echo'],
  );
});

test('a gemini provider is made from a config entry, its key from apiKeyEnv, and traces name it gcp.gemini', (t) => {
  const gateway = parseGatewayConfig(
    {
      providers: [{ id: 'google', kind: 'gemini', apiKeyEnv: 'GEMINI_KEY' }],
      models: [{ id: 'flash', provider: 'google', upstreamModel: 'gemini-2.5-flash' }],
    },
    'test',
  );
  const [google] = configuredProviders({ gateway, env: { GEMINI_KEY: 'g-1' }, providerKinds: providerRegistry });
  t.is(google?.id, 'google');
  t.is(google?.telemetry?.providerName, 'gcp.gemini');
  t.is(google?.neutral?.name, 'Gemini');
});

test('a bedrock provider is made from a config entry, its credentials from the variables it names, and traces name it aws.bedrock', (t) => {
  process.env.KMG_TEST_BEDROCK_KEY_ID = 'AKIDCONFIG';
  process.env.KMG_TEST_BEDROCK_SECRET = 'secret-of-the-config';
  const entry = { id: 'aws', kind: 'bedrock', region: 'eu-west-3', accessKeyIdEnv: 'KMG_TEST_BEDROCK_KEY_ID', secretAccessKeyEnv: 'KMG_TEST_BEDROCK_SECRET' };
  const models = [{ id: 'claude', provider: 'aws', upstreamModel: 'eu.anthropic.claude-sonnet-4-5-20250929-v1:0' }];
  const [aws] = configuredProviders({ gateway: parseGatewayConfig({ providers: [entry], models }, 'test'), env: {}, providerKinds: providerRegistry });
  t.is(aws?.telemetry?.providerName, 'aws.bedrock');
  t.is(aws?.neutral?.name, 'Bedrock Converse');
  const { secretAccessKeyEnv, ...half } = entry;
  t.truthy(secretAccessKeyEnv);
  const gateway = parseGatewayConfig({ providers: [half], models }, 'test');
  t.throws(() => configuredProviders({ gateway, env: {}, providerKinds: providerRegistry }), {
    message: 'koa-model-gateway: bedrockProvider(): the options must name accessKeyIdEnv and secretAccessKeyEnv together, and sessionTokenEnv only with them',
  });
});

// Each case: the file's content and the one line that refuses it (after `test: `).
const badFiles: Array<[unknown, string]> = [
  [[], 'the config must be an object'],
  [
    { keyprefix: 'x' },
    'keyprefix is not a setting (expected keyPrefix, keyCacheSeconds, limits, modelLimits, routing, upstreamTimeoutMs, upstreamMaxBytes, budgets, alerts, sweep, dashboard, providerModules, providers, models, mcpServers, mcp)',
  ],
  [
    { mcpServers: [{ id: 'git__hub', url: 'http://127.0.0.1:1/mcp' }] },
    'mcpServers[0].id must be 1 to 64 letters, digits and -, starting with a letter or digit',
  ],
  [
    {
      mcpServers: [
        { id: 'a', url: 'http://127.0.0.1:1/mcp' },
        { id: 'a', url: 'http://127.0.0.1:2/mcp' },
      ],
    },
    "mcpServers[1].id 'a' is the id of another server",
  ],
  [{ mcpServers: [{ id: 'a', url: 'http://u:p@127.0.0.1:1/mcp' }] }, 'mcpServers[0].url must not hold credentials'],
  [
    { mcpServers: [{ id: 'a', url: 'http://127.0.0.1:1/mcp', auth: { type: 'basic' } }] },
    "mcpServers[0].auth.type must be 'none', 'header' or 'oauth_client_credentials'",
  ],
  [
    { mcpServers: [{ id: 'a', url: 'http://127.0.0.1:1/mcp', auth: { type: 'header', valueEnv: 'TOKEN', value: 'Bearer x' } }] },
    'mcpServers[0].auth.value is not a setting (expected type, header, valueEnv)',
  ],
  [{ mcp: { callTimeoutMs: 0 } }, 'mcp.callTimeoutMs must be a positive integer of milliseconds, at most 2147483647 (about 24.8 days)'],
  [{ keyPrefix: 'a_b' }, 'keyPrefix must be 1 to 32 letters and digits'],
  [{ routing: { maxAttempts: 0 } }, 'routing.maxAttempts must be a positive integer'],
  [{ upstreamMaxBytes: 0 }, 'upstreamMaxBytes must be a positive integer'],
  [{ budgets: { reservationTtlSeconds: 0 } }, 'budgets.reservationTtlSeconds must be a positive integer'],
  [{ budgets: { defaultMaxOutputTokens: 1.5 } }, 'budgets.defaultMaxOutputTokens must be a positive integer'],
  [{ alerts: { webhooks: [{ url: 'ftp://x' }] } }, 'alerts.webhooks[0].url must be an http:// or https:// URL'],
  [{ alerts: { webhooks: [{ url: 'https://hooks.example/x', format: 'teams' }] } }, "alerts.webhooks[0].format must be 'generic' or 'slack'"],
  [{ upstreamTimeoutMs: 0 }, 'upstreamTimeoutMs must be a positive integer of milliseconds, at most 2147483647 (about 24.8 days)'],
  [{ routing: { cooldown: { second: 5 } } }, 'routing.cooldown.second is not a setting (expected failures, windowSeconds, seconds, maxSeconds)'],
  [{ models: [{ id: 'm', provider: 'echo', fallbacks: ['nope'] }] }, "models[0].fallbacks[0] must name another model of the catalog ('nope' is not one)"],
  [
    { models: [{ id: 'm', deployments: [{ provider: 'echo' }, { provider: 'gone' }] }] },
    "models[0].deployments[1].provider must name a configured provider ('gone' is not one)",
  ],
  [
    { models: [{ id: 'm', provider: 'other', deployments: [{ provider: 'echo' }] }] },
    'models[0].deployments cannot go with provider or upstreamModel (list them as a deployment)',
  ],
  [{ limits: { maxFiles: -1 } }, 'limits.maxFiles must be a positive integer'],
  [
    { limits: { maxFile: 1 } },
    'limits.maxFile is not a setting (expected maxFileBytes, maxFiles, maxStoredBytes, createsPerMinute, createsPerDay, bytesPerDay)',
  ],
  [{ sweep: { intervalSeconds: -1 } }, 'sweep.intervalSeconds must be a non-negative integer of seconds, at most 2147483 (about 24.8 days)'],
  // More than a Node timer holds, which would fire at once: a sweep every millisecond, every call timed out.
  [{ sweep: { intervalSeconds: 2_200_000 } }, 'sweep.intervalSeconds must be a non-negative integer of seconds, at most 2147483 (about 24.8 days)'],
  [{ upstreamTimeoutMs: 3_000_000_000 }, 'upstreamTimeoutMs must be a positive integer of milliseconds, at most 2147483647 (about 24.8 days)'],
  [{ routing: { budgetMs: 3_000_000_000 } }, 'routing.budgetMs must be a positive integer of milliseconds, at most 2147483647 (about 24.8 days)'],
  [{ routing: { backoff: { maxMs: 1e12 } } }, 'routing.backoff.maxMs must be a positive integer of milliseconds, at most 2147483647 (about 24.8 days)'],
  [{ routing: { retryStatuses: [200] } }, 'routing.retryStatuses[0] must be an HTTP error status (400 to 599)'],
  [{ routing: { retryStatuses: ['500'] } }, 'routing.retryStatuses[0] must be an HTTP error status (400 to 599)'],
  [{ modelLimits: { requestsPerMinute: -1 } }, 'modelLimits.requestsPerMinute must be a positive integer'],
  [{ modelLimits: { tokensPerDay: 1.5 } }, 'modelLimits.tokensPerDay must be a positive integer'],
  [{ modelLimits: { tokensPerMinute: '100' } }, 'modelLimits.tokensPerMinute must be a positive integer'],
  [{ modelLimits: { costPerMonth: 0 } }, 'modelLimits.costPerMonth must be a positive number of USD, from 1e-12 (one picodollar) to 1e15'],
  [{ modelLimits: { costPerDay: '5' } }, 'modelLimits.costPerDay must be a positive number of USD, from 1e-12 (one picodollar) to 1e15'],
  [{ modelLimits: { costPerDay: 1e-13 } }, 'modelLimits.costPerDay must be a positive number of USD, from 1e-12 (one picodollar) to 1e15'],
  [{ modelLimits: { costSoft: 'yes' } }, 'modelLimits.costSoft must be true or false'],
  [{ modelLimits: { costAlertThresholds: [0] } }, 'modelLimits.costAlertThresholds[0] must be 1 to 10 whole percents of the budget, each from 1 to 1000'],
  [
    { models: [{ id: 'm', provider: 'echo', price: { input: 1 } }] },
    'models[0].price.output must be a non-negative number of USD per million tokens, to at most 6 decimal places',
  ],
  [
    { modelLimits: { rpm: 10 } },
    'modelLimits.rpm is not a setting (expected requestsPerMinute, tokensPerMinute, tokensPerDay, costPerDay, costPerMonth, costSoft, costAlertThresholds)',
  ],
  [{ providers: [{ id: 'x', kind: 'openia' }] }, `providers[0].kind must be one of ${Object.keys(providerRegistry).join(', ')}`],
  [
    { providers: [{ id: 'o', kind: 'openai', apiKey: 'secret' }] },
    "providers[0].apiKey must not be in the file: put the credential in an environment variable and name it in 'apiKeyEnv'",
  ],
  [{ providers: [{ id: 'o', kind: 'openai', apiKeyEnv: 'not a name' }] }, 'providers[0].apiKeyEnv must name an environment variable (letters, digits and _)'],
  [{ providers: [{ id: 'e', kind: 'echo', apiKeyEnv: 'KEY' }] }, 'providers[0].apiKeyEnv is not a setting (expected id, kind)'],
  [{ models: [{ id: 'm', provider: 'nowhere' }] }, "models[0].provider must name a configured provider ('nowhere' is not one)"],
];

for (const [content, message] of badFiles) {
  test(`the config file ${JSON.stringify(content)} is refused with one line naming the setting`, (t) => {
    t.throws(() => parseGatewayConfig(content, 'test'), { instanceOf: ConfigError, message: `test: ${message}` });
  });
}

test('MCP servers: credentials are read from the variables auth names when the server starts, a missing one named', async (t) => {
  const gateway = parseGatewayConfig(
    {
      mcpServers: [
        { id: 'search', url: 'http://127.0.0.1:1/mcp', auth: { type: 'header', valueEnv: 'SEARCH_TOKEN' } },
        {
          id: 'crm',
          url: 'http://127.0.0.1:2/mcp',
          auth: { type: 'oauth_client_credentials', tokenUrl: 'http://127.0.0.1:3/token', clientIdEnv: 'CRM_ID', clientSecretEnv: 'CRM_SECRET' },
        },
      ],
    },
    'test',
  );
  t.deepEqual(gateway.mcp, { listTimeoutMs: 2000, callTimeoutMs: 60_000, bodyLimit: 10 * 1024 * 1024 });
  await t.throwsAsync(configuredMcpUpstreams(gateway.mcpServers, { SEARCH_TOKEN: 'x', CRM_ID: 'gw' }), {
    instanceOf: ConfigError,
    message: "MCP server 'crm': the environment variable CRM_SECRET (its auth.clientSecretEnv) is not set",
  });
  const upstreams = await configuredMcpUpstreams(gateway.mcpServers, { SEARCH_TOKEN: 'x', CRM_ID: 'gw', CRM_SECRET: 's' });
  t.deepEqual(
    upstreams.map((upstream) => upstream.id),
    ['search', 'crm'],
  );
  t.deepEqual(await configuredMcpUpstreams(parseGatewayConfig({}, 'test').mcpServers, {}), []);
});

test('keyCacheSeconds: 0 turns the key cache off; it must be a whole number of seconds up to an hour', (t) => {
  t.is(parseGatewayConfig({ keyCacheSeconds: 0 }, 'test').keyCacheSeconds, 0);
  t.is(parseGatewayConfig({ keyCacheSeconds: 30 }, 'test').keyCacheSeconds, 30);
  for (const keyCacheSeconds of [-1, 1.5, '5', 3601, null]) {
    t.throws(() => parseGatewayConfig({ keyCacheSeconds }, 'test'), { message: 'test: keyCacheSeconds must be an integer from 0 to 3600' });
  }
});

test('GATEWAY_CONFIG: a file that cannot be read or is not JSON is one line naming it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-config-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const missing = join(dir, 'missing.json');
  t.throws(() => loadConfig({ GATEWAY_CONFIG: missing }), { instanceOf: ConfigError, message: `GATEWAY_CONFIG: cannot read ${missing} (ENOENT)` });
  const broken = join(dir, 'broken.json');
  await writeFile(broken, '{ "keyPrefix": ');
  t.throws(() => loadConfig({ GATEWAY_CONFIG: broken }), { instanceOf: ConfigError, message: new RegExp(`^GATEWAY_CONFIG: ${broken} is not valid JSON`) });
  const bad = join(dir, 'bad.json');
  await writeFile(bad, JSON.stringify({ limits: { maxFiles: 0 } }));
  t.throws(() => loadConfig({ GATEWAY_CONFIG: bad }), {
    instanceOf: ConfigError,
    message: `GATEWAY_CONFIG (${bad}): limits.maxFiles must be a positive integer`,
  });
});

test('environment values that make no sense are refused', (t) => {
  for (const env of [
    { PORT: '70000' },
    { PORT: '-1' },
    { PORT: 'http' },
    { SHUTDOWN_GRACE_SECONDS: 'soon' },
    { LOG_LEVEL: 'verbose' },
    { REDIS_URL: '127.0.0.1' },
    { METRICS_PORT: '-1' },
    { METRICS_PORT: '65536' },
    { USAGE_RETENTION_DAYS: '-1' },
    { USAGE_ROLLUP_RETENTION_DAYS: 'a year' },
  ]) {
    t.throws(() => loadConfig(env), { instanceOf: ConfigError }, JSON.stringify(env));
  }
});

test('providerModules must be a list of module names', (t) => {
  t.throws(() => parseGatewayConfig({ providerModules: 'kmg-cohere' }, 'test'), { instanceOf: ConfigError, message: 'test: providerModules must be an array' });
  t.throws(() => parseGatewayConfig({ providerModules: [''] }, 'test'), {
    instanceOf: ConfigError,
    message: 'test: providerModules[0] must be a non-empty string',
  });
});

// BLOB_URL: files in a bucket rather than on disk.

const MINIO = { S3_ENDPOINT: 'http://127.0.0.1:9000', S3_FORCE_PATH_STYLE: '1', AWS_ACCESS_KEY_ID: 'minio', AWS_SECRET_ACCESS_KEY: 'secret-key' };

test('without BLOB_URL the files stay on disk', (t) => {
  t.is(loadConfig({}).s3, null);
  t.is(loadConfig({ AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y' }).s3, null, 'AWS variables alone choose nothing');
});

test('BLOB_URL names the bucket and the prefix; S3_ENDPOINT and S3_FORCE_PATH_STYLE a MinIO-style server', (t) => {
  t.deepEqual(loadConfig({ BLOB_URL: 's3://acme-files/gateway/pdfs/', ...MINIO }).s3, {
    bucket: 'acme-files',
    prefix: 'gateway/pdfs/',
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9000',
    forcePathStyle: true,
    credentials: { accessKeyId: 'minio', secretAccessKey: 'secret-key' },
  });
  t.like(parseS3Settings({ BLOB_URL: 's3://acme-files', AWS_REGION: 'eu-west-1' }), {
    prefix: '',
    region: 'eu-west-1',
    endpoint: null,
    forcePathStyle: false,
    credentials: null, // the SDK's own chain: a profile, an instance role
  });
  t.like(
    parseS3Settings({
      BLOB_URL: 's3://acme-files/x',
      AWS_DEFAULT_REGION: 'us-west-2',
      AWS_ACCESS_KEY_ID: 'a',
      AWS_SECRET_ACCESS_KEY: 'b',
      AWS_SESSION_TOKEN: 'c',
    }),
    {
      prefix: 'x/',
      region: 'us-west-2',
      credentials: { accessKeyId: 'a', secretAccessKey: 'b', sessionToken: 'c' },
    },
  );
});

// Each: the environment, and what the one line must say.
const badSettings: Array<[Record<string, string>, RegExp]> = [
  [{ BLOB_URL: 'gs://acme-files/x', AWS_REGION: 'eu-west-1' }, /^BLOB_URL must be s3:\/\/<bucket>\/<prefix>, got 'gs:\/\/'$/],
  [{ BLOB_URL: 'acme-files', AWS_REGION: 'eu-west-1' }, /^BLOB_URL must be s3:\/\/<bucket>\/<prefix>, got something else$/],
  [{ BLOB_URL: 's3://Acme_Files/x', AWS_REGION: 'eu-west-1' }, /^BLOB_URL: 'Acme_Files' is not a bucket name/],
  [{ BLOB_URL: 's3:///x', AWS_REGION: 'eu-west-1' }, /^BLOB_URL: '' is not a bucket name/],
  [{ BLOB_URL: 's3://key:secret@acme-files/x', AWS_REGION: 'eu-west-1' }, /^BLOB_URL must not hold credentials/],
  [{ BLOB_URL: 's3://acme-files/a//b', AWS_REGION: 'eu-west-1' }, /^BLOB_URL: the prefix 'a\/\/b' must be folder names/],
  [{ BLOB_URL: 's3://acme-files/../b', AWS_REGION: 'eu-west-1' }, /^BLOB_URL: the prefix '\.\.\/b' must be folder names/],
  [{ BLOB_URL: 's3://acme-files/x?versionId=1', AWS_REGION: 'eu-west-1' }, /the prefix 'x\?versionId=1' must be folder names/],
  [{ BLOB_URL: 's3://acme-files/x' }, /^BLOB_URL is an AWS S3 bucket: set AWS_REGION/],
  [{ BLOB_URL: 's3://acme-files/x', AWS_REGION: 'Europe (Paris)' }, /^AWS_REGION must be a region name such as eu-west-1, got 'Europe \(Paris\)'$/],
  [{ BLOB_URL: 's3://acme-files/x', AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'AKIA' }, /^AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY$/],
  [{ BLOB_URL: 's3://acme-files/x', AWS_REGION: 'eu-west-1', AWS_SECRET_ACCESS_KEY: 'secret' }, /^AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID$/],
  [{ BLOB_URL: 's3://acme-files/x', S3_ENDPOINT: 'ftp://minio:9000' }, /^S3_ENDPOINT must start with http:\/\/ or https:\/\//],
  [{ BLOB_URL: 's3://acme-files/x', S3_ENDPOINT: '127.0.0.1:9000' }, /^S3_ENDPOINT must be an http:\/\/ or https:\/\/ URL/],
  [{ BLOB_URL: 's3://acme-files/x', S3_ENDPOINT: 'http://u:secret@minio:9000' }, /^S3_ENDPOINT must not hold credentials/],
  [
    { BLOB_URL: 's3://acme-files/x', S3_ENDPOINT: 'http://minio:9000/acme-files' },
    /^S3_ENDPOINT must be the server's address only, as in http:\/\/minio:9000$/,
  ],
  [{ BLOB_URL: 's3://acme-files/x', ...MINIO, S3_FORCE_PATH_STYLE: 'yes' }, /^S3_FORCE_PATH_STYLE must be 1 or 0, got 'yes'$/],
  [{ S3_ENDPOINT: 'http://127.0.0.1:9000' }, /^S3_ENDPOINT is set but BLOB_URL is not/],
  [{ S3_FORCE_PATH_STYLE: '1' }, /^S3_FORCE_PATH_STYLE is set but BLOB_URL is not/],
  [{ BLOB_URL: 's3://acme-files/x', ...MINIO, FILES_DIR: '/srv/files' }, /^FILES_DIR and BLOB_URL are both set/],
];

test('settings that make no sense are refused, each with one line naming it and no secret', (t) => {
  for (const [env, message] of badSettings) {
    const error = t.throws(() => loadConfig(env), { instanceOf: ConfigError, message }, JSON.stringify(env));
    t.false(error?.message.includes('secret') ?? true, `no secret in: ${error?.message}`);
    t.false(error?.message.includes('\n') ?? true);
  }
});

// A provider kind from outside lib/ (examples/cohere-provider, compiled), named in the config file
// by the module that defines it: the CLI and the server import it before reading the providers.
const COHERE_MODULE = join(ROOT, 'dist/examples/cohere-provider/index.js');

test('a reference server serves a model through a provider kind of a module its config file names', async (t) => {
  const seen: Array<{ path: string; headers: IncomingHttpHeaders; body: Record<string, unknown> }> = [];
  const upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> });
      const answer = {
        id: 'c1',
        finish_reason: 'COMPLETE',
        message: { role: 'assistant', content: [{ type: 'text', text: 'Hello from Cohere' }] },
        usage: { tokens: { input_tokens: 4, output_tokens: 3 } },
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  t.teardown(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());

  const config = join(temp.dir, 'gateway.json');
  await writeFile(
    config,
    JSON.stringify({
      providerModules: [COHERE_MODULE],
      providers: [{ id: 'cohere', kind: 'cohere', baseURL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`, apiKeyEnv: 'COHERE_KEY' }],
      models: [{ id: 'command', provider: 'cohere', upstreamModel: 'command-a-03-2025' }],
      sweep: { intervalSeconds: 0 },
    }),
  );
  const env = { DATA_DIR: join(temp.dir, 'data'), GATEWAY_CONFIG: config, COHERE_KEY: 'co-secret' };
  const { key } = await createKey(env, ['--account', 'acme']);
  const server = await startServer(env);
  t.teardown(() => server.stop());

  const answer = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'command', messages: [{ role: 'user', content: 'Hello' }] }),
  });
  t.is(answer.status, 200);
  t.like(await answer.json(), {
    object: 'chat.completion',
    model: 'command',
    choices: [{ message: { content: 'Hello from Cohere' } }],
    usage: { total_tokens: 7 },
  });
  t.is(seen.length, 1);
  t.like(seen[0], { path: '/v2/chat', headers: { authorization: 'Bearer co-secret' }, body: { model: 'command-a-03-2025' } });
});

test("the module's kind's options are checked as a built-in kind's are, with one line naming the setting", async (t) => {
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const config = join(temp.dir, 'gateway.json');
  await writeFile(config, JSON.stringify({ providerModules: [COHERE_MODULE], providers: [{ id: 'cohere', kind: 'cohere', baseUrl: 'http://x' }] }));
  await t.throwsAsync(loadConfigWithModules({ GATEWAY_CONFIG: config }), {
    instanceOf: ConfigError,
    message: `GATEWAY_CONFIG (${config}): providers[0].baseUrl is not a setting (expected id, baseURL, kind, apiKeyEnv)`,
  });
});

test('a module that cannot be imported, exports no providerKinds, or redefines a kind is refused by name', async (t) => {
  const temp = await tempDataDir();
  t.teardown(() => temp.remove());
  const config = join(temp.dir, 'gateway.json');
  await writeFile(join(temp.dir, 'clash.mjs'), 'export const providerKinds = { openai: { options: { safeParse() {}, shape: {} }, create() {} } };\n');
  await writeFile(join(temp.dir, 'nothing.mjs'), 'export const other = 1;\n');
  const cases: Array<[string, string]> = [
    ['./missing.mjs', "providerModules: cannot import './missing.mjs' (ERR_MODULE_NOT_FOUND)"],
    ['./nothing.mjs', "providerModules: './nothing.mjs' must export providerKinds, an object of { options, create } by kind"],
    ['./clash.mjs', "providerModules: './clash.mjs' defines the provider kind 'openai', which is already defined"],
  ];
  for (const [module, message] of cases) {
    await writeFile(config, JSON.stringify({ providerModules: [module] }));
    await t.throwsAsync(loadConfigWithModules({ GATEWAY_CONFIG: config }), { instanceOf: ConfigError, message }, module);
  }
});
