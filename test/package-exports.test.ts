import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import test from 'ava';
import * as root from '../lib/index.js';
import type { AnswerFormat, EndpointFormat, StreamedAnswer, TokenUsage } from '../lib/models/index.js';
import * as memory from '../lib/stores/memory/index.js';
import * as testing from '../lib/testing/index.js';

const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { exports: Record<string, unknown> };
/** Each entry point with code: its path in package.json and its source file. */
const entryPoints = Object.entries(manifest.exports).flatMap(([path, entry]) =>
  typeof entry === 'string' ? [] : [{ path, source: (entry as Record<string, string>)['@koa-model-gateway/source'] as string }],
);

// The root is the chain every gateway starts with; each feature has an entry point of its own.
test('the package root exports the four pieces of every chain and nothing else', (t) => {
  t.deepEqual(Object.keys(root).sort(), ['apiKey', 'gatewayErrors', 'requireScope', 'underPath']);
});

test('package.json has an entry point per feature, per store family, and for settings and testing', (t) => {
  t.deepEqual(
    entryPoints.map(({ path }) => path),
    [
      '.',
      './errors',
      './auth',
      './files',
      './quota',
      './models',
      './usage',
      './cost',
      './admin',
      './metrics',
      './tracing',
      './settings',
      './testing',
      './stores/memory',
      './stores/knex',
      './stores/redis',
      './stores/fs',
      './stores/s3',
    ],
  );
});

test('every entry point begins with a doc comment that names it', (t) => {
  for (const { path, source } of entryPoints) {
    const text = readFileSync(new URL(`../../${source}`, import.meta.url), 'utf8');
    t.true(text.startsWith(`/**\n * \`koa-model-gateway${path.slice(1)}\``), path);
  }
});

// The reference server's plumbing (its protocol errors' body and lingering, its stale-uploads
// sweep, its CLI's messages) is imported from lib/ by path, not published.
test('no entry point exports the reference server\'s plumbing', async (t) => {
  const plumbing = ['LINGER_MS', 'shapeABody', 'newRequestId', 'isUploadTempName', 'ACCOUNT_NAME_RULE', 'KEY_NAME_RULE'];
  for (const { path, source } of entryPoints) {
    const names = Object.keys(await import(new URL(`../${source.replace(/^\.\//, '').replace(/\.ts$/, '.js')}`, import.meta.url).href));
    t.deepEqual(names.filter((name) => plumbing.includes(name)), [], path);
  }
});

// What an import of the root loads decides what every gateway loads: not the upload parser, the
// routers or the providers' HTTP client.
test('the package root loads without @koa/router, busboy, content-disposition, cookie or undici; koa-model-gateway/models needs undici', async (t) => {
  const run = promisify(execFile);
  const load = (file: string) =>
    run(process.execPath, ['--import', new URL('helpers/hide-packages.js', import.meta.url).href, '--input-type=module', '-e', `await import(${JSON.stringify(new URL(file, import.meta.url).href)})`], {
      env: { ...process.env, KMG_TEST_HIDDEN_PACKAGES: '@koa/router,@fastify/busboy,content-disposition,cookie,undici' },
    });
  await t.notThrowsAsync(load('../lib/index.js'));
  await t.throwsAsync(load('../lib/models/index.js'));
});

test('koa-model-gateway/stores/memory exports every memory implementation, the limiters among them', (t) => {
  t.deepEqual(Object.keys(memory).sort(), [
    'MemoryAdminSessionStore',
    'MemoryAdminTokenStore',
    'MemoryAuditStore',
    'MemoryBlobStore',
    'MemoryCooldownStore',
    'MemoryCreationLimiter',
    'MemoryFileStore',
    'MemoryKeyChanges',
    'MemoryKeyStore',
    'MemoryModelLimiter',
    'MemoryUsageStore',
  ]);
});

test('koa-model-gateway/testing exports the provider contract suite and every store contract suite, and nothing else', (t) => {
  t.deepEqual(Object.keys(testing).sort(), [
    'accountBudgetStoreContract',
    'adminSessionStoreContract',
    'adminTokenStoreContract',
    'auditStoreContract',
    'blobStoreContract',
    'cooldownStoreContract',
    'creationLimiterContract',
    'fileStoreContract',
    'keyChangesContract',
    'keyRotationContract',
    'keyStoreContract',
    'modelLimiterContract',
    'providerContract',
    'putFileContract',
    'spendLedgerContract',
    'usageStoreContract',
  ]);
});

test('every export of package.json names its types before its code, koa-model-gateway/testing among them', (t) => {
  const { exports } = manifest;
  t.like(exports['./testing'], { types: './dist/lib/testing/index.d.ts', default: './dist/lib/testing/index.js' });
  for (const [path, entry] of Object.entries(exports)) {
    if (typeof entry === 'string') continue;
    const conditions = Object.keys(entry as object);
    t.true(conditions.indexOf('types') < conditions.indexOf('default'), `${path}: types before default`);
  }
});

// Compiling is the test: a format's answer reader written outside lib/ type-checks against the published types.
test('the format types are exported from koa-model-gateway/models: AnswerFormat, StreamedAnswer, TokenUsage, EndpointFormat', (t) => {
  const none: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  const reader: StreamedAnswer = { event: (event) => event, usage: none };
  const answer: AnswerFormat = { json: () => none, stream: () => reader };
  const format: Pick<EndpointFormat, 'endpoint' | 'answer'> = { endpoint: 'chatCompletions', answer };
  t.is(format.answer.stream({}, 'm').event('data: {}\n\n'), 'data: {}\n\n');
});
