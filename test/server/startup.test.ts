import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { runCli, tempDataDir } from '../helpers/server-process.js';

const dirs: Array<{ remove(): Promise<void> }> = [];
test.after.always(() => Promise.all(dirs.map((dir) => dir.remove())));

async function dataDir() {
  const temp = await tempDataDir();
  dirs.push(temp);
  return temp.dir;
}

async function configFile(dir: string, content: unknown) {
  const path = join(dir, 'gateway.json');
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

// Each case: the environment (given the data dir) and what the one line must say.
const badConfigs: Array<[string, (dir: string) => Promise<Record<string, string>>, RegExp]> = [
  ['an unreadable config file', async (dir) => ({ GATEWAY_CONFIG: join(dir, 'missing.json') }), /GATEWAY_CONFIG: cannot read .*missing\.json \(ENOENT\)/],
  ['a config file that is not JSON', async (dir) => ({ GATEWAY_CONFIG: await configFile(dir, '{ "keyPrefix": ') }), /is not valid JSON/],
  ['an unknown setting in the config file', async (dir) => ({ GATEWAY_CONFIG: await configFile(dir, { keyprefix: 'x' }) }), /unknown setting 'keyprefix'/],
  ['a limit that is not a positive integer', async (dir) => ({ GATEWAY_CONFIG: await configFile(dir, { limits: { maxFiles: -1 } }) }), /limits\.maxFiles must be a positive integer/],
  ['a DATABASE_URL of an unsupported kind', async () => ({ DATABASE_URL: 'mysql://root:secret@db/x' }), /DATABASE_URL must start with postgres:\/\/, postgresql:\/\/ or sqlite:, got 'mysql:'/],
  ['a DATABASE_URL that is not a URL', async () => ({ DATABASE_URL: 'postgres://user:pa ss@/x' }), /DATABASE_URL/],
  ['a PostgreSQL server that does not answer', async () => ({ DATABASE_URL: 'postgres://u:secret@127.0.0.1:1/x' }), /cannot open the database at postgres:\/\/127\.0\.0\.1:1\/x/],
  ['a port that is not a number', async () => ({ PORT: 'http' }), /PORT must be an integer/],
  ['an unknown log level', async () => ({ LOG_LEVEL: 'loud' }), /LOG_LEVEL must be one of/],
  ['a REDIS_URL that is not one', async () => ({ REDIS_URL: 'localhost:6379' }), /REDIS_URL must start with redis:\/\//],
];

for (const [name, makeEnv, line] of badConfigs) {
  test(`serve with ${name} exits non-zero with one clear line`, async (t) => {
    const dir = await dataDir();
    const result = await runCli(['serve'], { DATA_DIR: dir, PORT: '0', ...(await makeEnv(dir)) });
    t.is(result.code, 1);
    t.regex(result.stderr, /^koa-model-gateway: [^\n]+\n$/);
    t.regex(result.stderr, line);
    t.false(result.stderr.includes('secret'), 'no password in the message');
  });
}
