// Loaded in each AVA worker before its test file (ava.config.js `require`). With KMG_TEST_COVERAGE
// naming a directory (npm test names c8's), the worker takes V8's coverage itself and writes only
// the compiled lib/ and reference-server/ for `c8 report`. NODE_V8_COVERAGE, which `c8 ava` sets,
// cost the suite a third more CPU: it counted and wrote every module of every worker and process.
// The processes a test starts collect none; what they run is also run in the workers.
import { Session } from 'node:inspector';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { threadId } from 'node:worker_threads';

const directory = process.env.KMG_TEST_COVERAGE;

if (directory) {
  const measured = ['dist/lib/', 'dist/reference-server/'].map((folder) => pathToFileURL(join(process.cwd(), folder)).href);
  const session = new Session();
  session.connect();
  // A session on its own thread answers at once, so the coverage is taken in the exit event.
  session.post('Profiler.enable');
  session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: true });
  process.once('exit', () => {
    session.post('Profiler.takePreciseCoverage', (err, coverage) => {
      if (err) throw err;
      const result = coverage.result.filter((script) => measured.some((prefix) => script.url.startsWith(prefix)));
      mkdirSync(directory, { recursive: true });
      writeFileSync(join(directory, `coverage-${process.pid}-${threadId}.json`), JSON.stringify({ result }));
    });
  });
}
