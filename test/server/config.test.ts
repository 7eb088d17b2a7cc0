import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import test from 'ava';
import { providerRegistry } from '../../lib/models/providers/registry.js';
import { ConfigError } from '../../reference-server/config-error.js';
import { configuredProviders, loadConfig, parseDatabaseUrl, parseGatewayConfig } from '../../reference-server/config.js';
import { SPEC_LIMITS } from '../helpers/spec-limits.js';

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
  });
  t.deepEqual(config.gateway.limits, SPEC_LIMITS);
  t.is(config.gateway.keyPrefix, 'kmg');
  t.is(config.gateway.keyCacheSeconds, 1, 'a revoked key is refused within 1 s by default (decisions.md)');
  t.deepEqual(config.gateway.providers, [{ id: 'echo', kind: 'echo' }]);
  t.deepEqual(
    config.gateway.models.map((model) => model.id),
    ['echo-1', 'echo-2'],
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
  t.deepEqual(config.providers, [{ id: 'openai', kind: 'openai', apiKeyEnv: 'KMG_UNSET_VARIABLE' }, { id: 'echo', kind: 'echo' }]);
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
  t.deepEqual(config.models, [{ id: 'my-echo', provider: 'echo', upstreamModel: 'my-echo', deployments: [{ provider: 'echo', upstreamModel: 'my-echo', weight: 1 }], fallbacks: [], created: 0, display_name: 'my-echo' }]);
  t.deepEqual(configuredProviders({ gateway: config, env: {}, providerKinds: providerRegistry }).map((provider) => provider.id), ['echo']);
});

test('provider credentials are read from the variables apiKeyEnv names only when the providers are made', (t) => {
  const gateway = parseGatewayConfig({ providers: [{ id: 'openai', kind: 'openai', apiKeyEnv: 'OPENAI_KEY' }] }, 'test');
  t.throws(() => configuredProviders({ gateway, env: {}, providerKinds: providerRegistry }), {
    instanceOf: ConfigError,
    message: "provider 'openai': the environment variable OPENAI_KEY (its apiKeyEnv) is not set",
  });
  t.deepEqual(configuredProviders({ gateway, env: { OPENAI_KEY: 'sk-1' }, providerKinds: providerRegistry }).map((provider) => provider.id), ['openai', 'echo']);
});

// Each case: the file's content and the one line that refuses it (after `test: `).
const badFiles: Array<[unknown, string]> = [
  [[], 'the config must be an object'],
  [{ keyprefix: 'x' }, 'keyprefix is not a setting (expected keyPrefix, keyCacheSeconds, limits, modelLimits, routing, sweep, providerModules, providers, models)'],
  [{ keyPrefix: 'a_b' }, 'keyPrefix must be 1 to 32 letters and digits'],
  [{ routing: { maxAttempts: 0 } }, 'routing.maxAttempts must be a positive integer'],
  [{ routing: { cooldown: { second: 5 } } }, 'routing.cooldown.second is not a setting (expected failures, windowSeconds, seconds)'],
  [{ models: [{ id: 'm', provider: 'echo', fallbacks: ['nope'] }] }, "models[0].fallbacks[0] must name another model of the catalog ('nope' is not one)"],
  [{ models: [{ id: 'm', deployments: [{ provider: 'echo' }, { provider: 'gone' }] }] }, "models[0].deployments[1].provider must name a configured provider ('gone' is not one)"],
  [{ models: [{ id: 'm', provider: 'other', deployments: [{ provider: 'echo' }] }] }, 'models[0].deployments cannot go with provider or upstreamModel (list them as a deployment)'],
  [{ limits: { maxFiles: -1 } }, 'limits.maxFiles must be a positive integer'],
  [{ limits: { maxFile: 1 } }, 'limits.maxFile is not a setting (expected maxFileBytes, maxFiles, maxStoredBytes, createsPerMinute, createsPerDay, bytesPerDay)'],
  [{ sweep: { intervalSeconds: -1 } }, 'sweep.intervalSeconds must be a non-negative integer'],
  [{ modelLimits: { requestsPerMinute: -1 } }, 'modelLimits.requestsPerMinute must be a positive integer'],
  [{ modelLimits: { tokensPerDay: 1.5 } }, 'modelLimits.tokensPerDay must be a positive integer'],
  [{ modelLimits: { tokensPerMinute: '100' } }, 'modelLimits.tokensPerMinute must be a positive integer'],
  [{ modelLimits: { costPerMonth: 0 } }, 'modelLimits.costPerMonth must be a positive number of USD'],
  [{ modelLimits: { costPerDay: '5' } }, 'modelLimits.costPerDay must be a positive number of USD'],
  [{ models: [{ id: 'm', provider: 'echo', price: { input: 1 } }] }, 'models[0].price.output must be a non-negative number of USD per million tokens, to at most 6 decimal places'],
  [{ modelLimits: { rpm: 10 } }, 'modelLimits.rpm is not a setting (expected requestsPerMinute, tokensPerMinute, tokensPerDay, costPerDay, costPerMonth)'],
  [{ providers: [{ id: 'x', kind: 'openia' }] }, 'providers[0].kind must be one of openai, anthropic, echo'],
  [{ providers: [{ id: 'o', kind: 'openai', apiKey: 'secret' }] }, "providers[0].apiKey must not be in the file: put the credential in an environment variable and name it in 'apiKeyEnv'"],
  [{ providers: [{ id: 'o', kind: 'openai', apiKeyEnv: 'not a name' }] }, 'providers[0].apiKeyEnv must name an environment variable (letters, digits and _)'],
  [{ providers: [{ id: 'e', kind: 'echo', apiKeyEnv: 'KEY' }] }, 'providers[0].apiKeyEnv is not a setting (expected id, kind)'],
  [{ models: [{ id: 'm', provider: 'nowhere' }] }, "models[0].provider must name a configured provider ('nowhere' is not one)"],
];

for (const [content, message] of badFiles) {
  test(`the config file ${JSON.stringify(content)} is refused with one line naming the setting`, (t) => {
    t.throws(() => parseGatewayConfig(content, 'test'), { instanceOf: ConfigError, message: `test: ${message}` });
  });
}

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
  t.throws(() => loadConfig({ GATEWAY_CONFIG: bad }), { instanceOf: ConfigError, message: `GATEWAY_CONFIG (${bad}): limits.maxFiles must be a positive integer` });
});

test('environment values that make no sense are refused', (t) => {
  for (const env of [{ PORT: '70000' }, { PORT: '-1' }, { PORT: 'http' }, { SHUTDOWN_GRACE_SECONDS: 'soon' }, { LOG_LEVEL: 'verbose' }, { REDIS_URL: '127.0.0.1' }, { METRICS_PORT: '-1' }, { METRICS_PORT: '65536' }]) {
    t.throws(() => loadConfig(env), { instanceOf: ConfigError }, JSON.stringify(env));
  }
});

test('providerModules must be a list of module names', (t) => {
  t.throws(() => parseGatewayConfig({ providerModules: 'kmg-cohere' }, 'test'), { instanceOf: ConfigError, message: 'test: providerModules must be an array' });
  t.throws(() => parseGatewayConfig({ providerModules: [''] }, 'test'), { instanceOf: ConfigError, message: 'test: providerModules[0] must be a non-empty string' });
});
