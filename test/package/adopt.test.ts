import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { ROOT, compiledCli } from '../helpers/server-process.js';

// The package as a team installs it: packed from the build (`npm run build`, as npm test runs
// it) and installed into a new app with koa only. Packages come from the npm cache when it has
// them (--prefer-offline), else from the registry.

const run = promisify(execFile);
const DRIVERS = ['knex', 'pg', 'better-sqlite3', 'ioredis', 'pino', 'prom-client', '@opentelemetry/api', '@opentelemetry/sdk-trace-node'];

const temp = await mkdtemp(join(tmpdir(), 'kmg-adopt-'));
const appDir = join(temp, 'app');
test.after.always(() => rm(temp, { recursive: true, force: true }));

/** The environment without what `npm test` adds: npm_config_local_prefix would install into this checkout. */
function npmEnv(): NodeJS.ProcessEnv {
  const keep = new Set(['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig']);
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('npm_') || keep.has(name)));
}

const npm = (cwd: string, args: string[]) =>
  run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error', '--no-update-notifier'], { cwd, env: npmEnv() });

const APP = `
import Koa from 'koa';
import { apiKey, gatewayErrors } from 'koa-model-gateway';
import { createApiKey } from 'koa-model-gateway/auth';
import { MemoryKeyStore } from 'koa-model-gateway/stores/memory';

const store = new MemoryKeyStore();
const { key } = await createApiKey(store, { prefix: 'app', account: 'acme', scopes: ['models:read'] });
const app = new Koa()
  .use(gatewayErrors())
  .use(apiKey({ store }))
  .use((ctx) => { ctx.body = { account: ctx.state.apiKey.account }; });
const server = app.listen(0, '127.0.0.1');
await new Promise((resolve) => server.once('listening', resolve));
const url = \`http://127.0.0.1:\${server.address().port}/\`;
const answer = async (headers) => {
  const response = await fetch(url, { headers });
  return { status: response.status, body: await response.json() };
};
const results = { withKey: await answer({ authorization: \`Bearer \${key}\` }), withoutKey: await answer({}) };
server.close();
process.stdout.write(JSON.stringify(results));
`;

// The provider contract as a team runs it from the installed package: with a test function of its
// own (no ava installed), against the offline echo provider.
const CONTRACT = `
import { echoProvider } from 'koa-model-gateway/models';
import { providerContract } from 'koa-model-gateway/testing';
import { deepStrictEqual, equal, ok } from 'node:assert/strict';

const tests = [];
providerContract((title, run) => tests.push({ title, run }), {
  name: 'echo',
  create: () => echoProvider({ id: 'echo' }),
  offline: ['chatCompletions'],
});
const t = { is: (a, b, m) => equal(a, b, m), deepEqual: (a, b, m) => deepStrictEqual(a, b, m), true: (a, m) => ok(a, m) };
for (const { run } of tests) await run(t);
process.stdout.write(JSON.stringify(tests.map(({ title }) => title)));
`;

// A store contract suite as a team runs it from the installed package: a test function and a `t` of its own.
const STORE_CONTRACT = `
import { MemoryAdminTokenStore } from 'koa-model-gateway/stores/memory';
import { adminTokenStoreContract } from 'koa-model-gateway/testing';
import { deepStrictEqual, equal, match, ok } from 'node:assert/strict';

const tests = [];
adminTokenStoreContract((title, run) => tests.push({ title, run }), 'memory', async () => new MemoryAdminTokenStore());
const t = {
  is: (a, b, m) => equal(a, b, m),
  deepEqual: (a, b, m) => deepStrictEqual(a, b, m),
  true: (a, m) => equal(a, true, m),
  false: (a, m) => equal(a, false, m),
  regex: (a, pattern, m) => match(a, pattern, m),
  like: (a, selector, m) => deepStrictEqual(Object.fromEntries(Object.keys(selector).map((k) => [k, a[k]])), selector, m),
};
for (const { run } of tests) await run(t);
ok(tests.length > 0);
process.stdout.write(JSON.stringify(tests.map(({ title }) => title)));
`;

test.before(async () => {
  const manifest = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { peerDependencies: Record<string, string> };
  await mkdir(appDir, { recursive: true });
  await compiledCli();
  // --ignore-scripts: prepack would build again.
  const { stdout } = await npm(ROOT, ['pack', '--json', '--ignore-scripts', '--pack-destination', appDir]);
  const [{ filename }] = JSON.parse(stdout) as [{ filename: string }];
  await writeFile(join(appDir, 'package.json'), JSON.stringify({ name: 'adopting-app', private: true, type: 'module' }));
  await writeFile(join(appDir, 'app.js'), APP);
  await writeFile(join(appDir, 'contract.js'), CONTRACT);
  await writeFile(join(appDir, 'store-contract.js'), STORE_CONTRACT);
  await npm(appDir, ['install', '--prefer-offline', '--ignore-scripts', `./${filename}`, `koa@${manifest.peerDependencies.koa}`]);
});

test('an app with koa-model-gateway and koa installs none of the drivers', (t) => {
  t.true(existsSync(join(appDir, 'node_modules/koa-model-gateway/package.json')));
  t.deepEqual(
    DRIVERS.filter((name) => existsSync(join(appDir, 'node_modules', name))),
    [],
  );
});

test('apiKey() with the memory stores answers 200 with a valid key and 401 without one, with no driver installed', async (t) => {
  const { stdout } = await run(process.execPath, ['app.js'], { cwd: appDir });
  t.deepEqual(JSON.parse(stdout), {
    withKey: { status: 200, body: { account: 'acme' } },
    withoutKey: {
      status: 401,
      body: { error: { message: 'Invalid API key', type: 'authentication_error', param: null, code: 'invalid_api_key' } },
    },
  });
});

test("the installed CLI names the reference server's missing packages and the command that installs them", async (t) => {
  const failure = await t.throwsAsync(run(join(appDir, 'node_modules/.bin/koa-model-gateway'), ['serve'], { cwd: appDir }));
  const { code, stderr } = failure as Error & { code: number; stderr: string };
  t.is(code, 1);
  t.is(
    stderr,
    'koa-model-gateway: the reference server needs knex and pino, not installed: npm install knex pino better-sqlite3 (pg instead of better-sqlite3 for PostgreSQL)\n',
  );
});

test('koa-model-gateway/testing runs its provider contract from the installed package, without ava', async (t) => {
  t.false(existsSync(join(appDir, 'node_modules/ava')));
  const { stdout } = await run(process.execPath, ['contract.js'], { cwd: appDir });
  t.deepEqual(JSON.parse(stdout), [
    "echo: chatCompletions: a JSON answer and a stream reach the client in the endpoint's format",
    'echo: chatCompletions: a call whose signal is already aborted sends nothing upstream and settles',
  ]);
});

test('koa-model-gateway/testing runs a store contract suite from the installed package, without ava', async (t) => {
  t.false(existsSync(join(appDir, 'node_modules/ava')));
  const { stdout } = await run(process.execPath, ['store-contract.js'], { cwd: appDir });
  t.deepEqual(JSON.parse(stdout), [
    'memory: a created token is found by its hash and its id, and listed in creation order',
    'memory: revoke marks the token once and reports unknown ids',
  ]);
});
