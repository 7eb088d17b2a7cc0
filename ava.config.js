// AVA runs the compiled tests (`npm run build:tests` writes dist/), three files at a time.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { setFlagsFromString } from 'node:v8';

// AVA's workers are threads of this process, each compiling the same modules again and running
// most functions briefly: V8's optimizing compiler, at 16 times its default budget, optimizes only
// what runs long (docs/DECISIONS.md measures it). A worker thread takes no V8 flag of its own
// (execArgv), so it is set here, before the first one starts.
setFlagsFromString('--interrupt-budget=1081344');

/**
 * With KMG_TEST_GROUPS set (`npm test` sets it), each test/groups/*.ts runs the files it lists in
 * one worker instead of one each: a worker's start and its imports cost about 0.7 CPU-seconds.
 * Without it every file runs alone, and any one can be run by name.
 */
const groups = process.env.KMG_TEST_GROUPS ? readdirSync('test/groups').map((name) => join('test/groups', name)) : [];
const grouped = groups.flatMap((group) =>
  [...readFileSync(group, 'utf8').matchAll(/'(\.\.\/[^']+\.test)\.js'/g)].map(([, file]) => relative('.', resolve('test/groups', `${file}.ts`))),
);
if (new Set(grouped).size !== grouped.length) throw new Error('ava.config.js: a test file is in two groups');

/**
 * The files that take longest from start to end, most of it waiting (a browser, child processes,
 * timeouts run out on purpose): started first, they wait beside the others' work instead of
 * making the run's tail. Any file missing from the list runs after them, in name order.
 */
const LONGEST_FIRST = [
  'test/dashboard/dashboard.test.ts',
  'test/stores/knex-sqlite/files.test.ts',
  'test/stores/knex-postgres/keys.test.ts',
  'test/admin/admin-api.test.ts',
  'test/stores/postgres-faults.test.ts',
  'test/stores/knex-postgres/files.test.ts',
  'test/server/lifecycle.test.ts',
  'test/stores/knex-sqlite/keys.test.ts',
  'test/package/adopt.test.ts',
  'test/server/tracing.test.ts',
  'test/stores/knex-sqlite/usage.test.ts',
  'test/server/outages.test.ts',
  'test/server/limits.test.ts',
  'test/stores/knex-plumbing.test.ts',
  'test/admin/sso.test.ts',
  'test/mcp/mcp-deployments.test.ts',
  'test/server/api.test.ts',
  'test/stores/knex-postgres/admin.test.ts',
  'test/stores/knex-postgres/usage.test.ts',
  'test/stores/knex-sqlite/admin.test.ts',
  'test/stores/blob-stores.test.ts',
  'test/groups/extending.ts',
  'test/groups/endpoints.ts',
  'test/groups/units.ts',
  'test/routing/routing.test.ts',
  'test/cache/response-cache.test.ts',
];

const rank = (file) => {
  const index = LONGEST_FIRST.findIndex((name) => file.endsWith(name));
  return index === -1 ? LONGEST_FIRST.length : index;
};

export default {
  files: [...groups, 'test/**/*.test.ts', 'examples/**/*.test.ts', ...grouped.map((file) => `!${file}`)],
  typescript: {
    rewritePaths: { 'test/': 'dist/test/', 'examples/': 'dist/examples/' },
    compile: false,
  },
  // Compiled by build:tests: each worker takes its own coverage for c8 (test/helpers/coverage.ts).
  require: ['./dist/test/helpers/coverage.js'],
  // AVA's bound on a file with no test ending: package/adopt's npm pack and install took more than
  // a minute on a loaded machine. A hang is still reported, later.
  timeout: '180s',
  // On two cores, three workers at once cost less CPU than four (docs/DECISIONS.md).
  concurrency: 3,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
  environmentVariables: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
};
