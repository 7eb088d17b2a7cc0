// The files that take longest, most of it waiting on timeouts, databases and child processes,
// start first: the run then ends on short files that keep both cores busy, not on one long file.
const SLOW_FIRST = [
  'test/stores/postgres-faults.test.ts',
  'test/stores/file-store.test.ts',
  'test/stores/key-store.test.ts',
  'test/package/adopt.test.ts',
  'test/admin/redis-stall.test.ts',
  'test/stores/migrations.test.ts',
  'test/server/tracing.test.ts',
  'test/dashboard/dashboard.test.ts',
  'test/server/s3-stall.test.ts',
  'test/server/shutdown.test.ts',
  'test/server/optional-peers.test.ts',
  'test/admin/key-identity.test.ts',
];

const rank = (file) => {
  const index = SLOW_FIRST.findIndex((slow) => file.endsWith(slow));
  return index === -1 ? SLOW_FIRST.length : index;
};

export default {
  files: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
  typescript: {
    rewritePaths: { 'test/': 'dist/test/', 'examples/': 'dist/examples/' },
    compile: false,
  },
  timeout: '60s',
  concurrency: 4,
  environmentVariables: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b, [], { numeric: true }),
};
