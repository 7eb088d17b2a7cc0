/**
 * Every scenario, one after the other, each printing its table (`npm run bench`).
 * Options (environment): BENCH_DURATION, BENCH_WARMUP, BENCH_ROUNDS (overhead, metering, proxy), BENCH_UPLOADS,
 * BENCH_UPLOAD_ROUNDS, BENCH_LISTINGS, BENCH_LIMIT_OPERATIONS, BENCH_PROXY_ROUTES, BENCH_PROXY_CASES,
 * BENCH_PROXY_REQUESTS, BENCH_PROXY_STREAMS, BENCH_PROXY_HELD, BENCH_SQLITE_RECORDS, BENCH_PORTKEY_VERSION, BENCH_PORTKEY_DIR,
 * BENCH_RUNTIME=tsx, BENCH_PIN=0, BENCH_IDLE_POLL=0, BENCH_PROFILE=<dir>, BENCH_DATABASE_URL,
 * BENCH_REDIS_URL. See BENCHMARKS.md.
 * Run: node --import tsx bench/all.ts [overhead|uploads|listing|limits|metering|proxy|sqlite-writes]...
 */
import { limits } from './limits.js';
import { listing } from './listing.js';
import { metering } from './metering.js';
import { overhead } from './overhead.js';
import { proxy } from './proxy.js';
import { sqliteWrites } from './sqlite-writes.js';
import { uploads } from './uploads.js';

const SCENARIOS: Record<string, () => Promise<string>> = { overhead, uploads, listing, limits, metering, proxy, 'sqlite-writes': sqliteWrites };

const asked = process.argv.slice(2);
const unknown = asked.filter((name) => !(name in SCENARIOS));
if (unknown.length > 0) {
  console.error(`bench: unknown scenario ${unknown.join(', ')} (scenarios: ${Object.keys(SCENARIOS).join(', ')})`);
  process.exit(2);
}
for (const name of asked.length > 0 ? asked : Object.keys(SCENARIOS)) {
  console.log(`${await (SCENARIOS[name] as () => Promise<string>)()}\n`);
}
