import { resolve } from 'node:path';
import test from 'ava';
import { ConfigError } from '../../reference-server/config-error.js';
import { loadConfig, parseDatabaseUrl, parseGatewayConfig } from '../../reference-server/config.js';
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
  t.is(config.gateway.keyCacheSeconds, 5, 'a revoked key is refused within 5 s by default');
  t.deepEqual(config.gateway.providers, [{ id: 'local', kind: 'echo' }]);
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
});

test('the config file: limits per field, providers and models together, credentials from apiKeyEnv', (t) => {
  const config = parseGatewayConfig(
    {
      keyPrefix: 'acme',
      limits: { maxFiles: 5 },
      providers: [{ id: 'openai', kind: 'openai', apiKeyEnv: 'OPENAI_KEY' }],
      models: [{ id: 'gpt', provider: 'openai', upstreamModel: 'gpt-4.1-mini', created: 1 }],
    },
    'test',
    { OPENAI_KEY: 'sk-1' },
  );
  t.is(config.keyPrefix, 'acme');
  t.deepEqual(config.limits, { ...SPEC_LIMITS, maxFiles: 5 });
  t.deepEqual(config.providers, [{ id: 'openai', kind: 'openai', apiKey: 'sk-1' }]);
  t.deepEqual(
    parseGatewayConfig({ providers: [{ id: 'openai', kind: 'openai' }] }, 'test').models,
    [],
    'a file with providers and no models has no models, not the default echo ones',
  );
  t.throws(() => parseGatewayConfig({ keyPrefix: 'a_b' }, 'test'), { message: /keyPrefix must be 1 to 32 letters and digits/ });
  t.throws(() => parseGatewayConfig({ sweep: { intervalSeconds: -1 } }, 'test'), { message: /sweep\.intervalSeconds must be a non-negative integer/ });
  t.is(parseGatewayConfig({ sweep: { intervalSeconds: 0 } }, 'test').sweep.intervalSeconds, 0);
});

test('keyCacheSeconds: 0 turns the key cache off; it must be a whole number of seconds up to an hour', (t) => {
  t.is(parseGatewayConfig({ keyCacheSeconds: 0 }, 'test').keyCacheSeconds, 0);
  t.is(parseGatewayConfig({ keyCacheSeconds: 30 }, 'test').keyCacheSeconds, 30);
  for (const keyCacheSeconds of [-1, 1.5, '5', 3601, null]) {
    t.throws(() => parseGatewayConfig({ keyCacheSeconds }, 'test'), { message: /keyCacheSeconds must be an integer from 0 to 3600/ });
  }
});

test('environment values that make no sense are refused', (t) => {
  for (const env of [{ PORT: '70000' }, { PORT: '-1' }, { SHUTDOWN_GRACE_SECONDS: 'soon' }, { LOG_LEVEL: 'verbose' }, { REDIS_URL: '127.0.0.1' }]) {
    t.throws(() => loadConfig(env), { instanceOf: ConfigError }, JSON.stringify(env));
  }
});
