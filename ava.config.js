// AVA runs the compiled tests (`npm run build:tests` writes dist/), four files at a time.

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
  'test/routing/routing.test.ts',
  'test/cache/response-cache.test.ts',
  'test/testing/provider-contract.test.ts',
  'examples/cohere-provider/cohere-provider.test.ts',
];

const rank = (file) => {
  const index = LONGEST_FIRST.findIndex((name) => file.endsWith(name));
  return index === -1 ? LONGEST_FIRST.length : index;
};

export default {
  files: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
  typescript: {
    rewritePaths: { 'test/': 'dist/test/', 'examples/': 'dist/examples/' },
    compile: false,
  },
  // Compiled by build:tests: each worker takes its own coverage for c8 (test/helpers/coverage.ts).
  require: ['./dist/test/helpers/coverage.js'],
  // AVA's bound on a file with no test ending: package/adopt's npm pack and install took more than
  // a minute on a loaded machine. A hang is still reported, later.
  timeout: '180s',
  concurrency: 4,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
  environmentVariables: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
};
