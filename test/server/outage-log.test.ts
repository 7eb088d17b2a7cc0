import { Writable } from 'node:stream';
import test from 'ava';
import Koa from 'koa';
import { pino, type Logger } from 'pino';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { logAppError } from '../../reference-server/logger.js';
import { OutageLog } from '../../reference-server/outage-log.js';
import { listen } from '../helpers/http.js';
import { until } from '../helpers/poll.js';

interface Line {
  level: number;
  msg: string;
  store?: string;
  failures?: number;
  driverWarnings?: number;
  downForMs?: number;
  [field: string]: unknown;
}

function sink(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const raw of chunk.toString('utf8').split('\n')) if (raw !== '') lines.push(JSON.parse(raw) as Line);
      done();
    },
  });
  // pino writes synchronously to a stream it is given: each line is in `lines` once the call returns.
  return { logger: pino({ level: 'info' }, destination), lines };
}

const ACQUIRE_WARNING = 'Acquire connection error: Error: connect ECONNREFUSED 127.0.0.1:5432\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16)';

test('a burst of failures of one store is one line, then a count per second at most, driver warnings folded in', (t) => {
  const { logger, lines } = sink();
  let now = 1_000_000;
  const outages = new OutageLog(logger, { nowMs: () => now });
  t.teardown(() => outages.close());

  // 1,000 failed requests and 300 Knex warnings within the first second of a database outage.
  for (let i = 0; i < 1000; i++) {
    outages.failed('database', { requestId: `r${i}`, status: 503, cause: 'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:5432' });
    if (i % 10 === 0) outages.warned('database', ACQUIRE_WARNING);
    if (i % 10 === 5) outages.warned('database', ACQUIRE_WARNING);
    now += 0.9;
  }
  t.is(lines.length, 1);
  t.like(lines[0], { level: 50, msg: 'store unavailable', store: 'database', requestId: 'r0' });

  // The next second's first failure writes the count of everything since.
  now += 200;
  outages.failed('database', { requestId: 'late', status: 503 });
  t.is(lines.length, 2);
  t.like(lines[1], { level: 50, msg: 'store still unavailable', store: 'database', failures: 1000, driverWarnings: 200 });
  for (let i = 0; i < 500; i++) outages.failed('database', { status: 503 });
  t.is(lines.length, 2, 'nothing more within the second');

  // Another store's outage is its own.
  outages.failed('redis', { status: 503 });
  t.is(lines.length, 3);
  t.like(lines[2], { msg: 'store unavailable', store: 'redis' });
});

test('a driver warning first is the outage\'s one line, its first line only, no stack', (t) => {
  const { logger, lines } = sink();
  const outages = new OutageLog(logger, { nowMs: () => 0 });
  t.teardown(() => outages.close());
  for (let i = 0; i < 100; i++) outages.warned('database', ACQUIRE_WARNING);
  outages.failed('database', { status: 503 });
  t.deepEqual(lines.map((line) => [line.msg, line.cause]), [['store unavailable', 'Acquire connection error: Error: connect ECONNREFUSED 127.0.0.1:5432']]);
});

test('a store that is back says so once, with the count of what its outage cost; its next outage is a new one', async (t) => {
  const { logger, lines } = sink();
  let answering = false;
  let now = 0;
  const outages = new OutageLog(logger, { nowMs: () => now, intervalMs: 10 });
  t.teardown(() => outages.close());
  outages.watch('database', async () => {
    if (!answering) throw new Error('refused');
  });

  for (let i = 0; i < 50; i++) outages.failed('database', { status: 503 });
  now = 5;
  answering = true;
  const back = await until(
    async () => lines.filter((line) => line.msg === 'store is back'),
    (found) => found.length > 0,
  );
  t.like(back, [{ level: 30, store: 'database', failures: 49, driverWarnings: 0, downForMs: 5 }]);

  outages.failed('database', { status: 503, requestId: 'again' });
  t.like(lines.at(-1), { msg: 'store unavailable', requestId: 'again' });
  t.is(lines.length, 3);
});

test('requests failing on a store through the app: one line for the burst, a store named by the error or else the database', async (t) => {
  const { logger, lines } = sink();
  const outages = new OutageLog(logger, { nowMs: () => 0 });
  t.teardown(() => outages.close());
  const app = new Koa();
  app.on('error', logAppError(logger, outages));
  app.use(openAIErrors());
  app.use((ctx) => {
    if (ctx.path === '/s3') throw new StoreUnavailableError('the S3 store is unavailable', { store: 's3' });
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  });
  const server = await listen(app);
  t.teardown(() => server.close());
  for (let i = 0; i < 20; i++) {
    for (const path of ['/db', '/s3']) t.is((await fetch(`${server.url}${path}`)).status, 503);
  }
  t.deepEqual(
    lines.map((line) => [line.msg, line.store]),
    [
      ['store unavailable', 'database'],
      ['store unavailable', 's3'],
    ],
  );
});
