/**
 * The floor for a cache hit: bare Koa doing, the cheapest way, what the spec asks of every model
 * call answered from an exact cache, and nothing else. Per POST /v1/chat/completions (or
 * /v1/messages, /v1/responses: the cached formats):
 * - a request id (`req_` and 32 alphanumerics) on `x-request-id` and in the call's log line;
 * - the key (`x-api-key`, else `Authorization: Bearer`) checked by its SHA-256 against KEY_SHA256
 *   (one key, one account: a Map lookup);
 * - the body read and `JSON.parse`d, its `model` looked up in MODELS (`client=upstream` pairs);
 * - one request counted against the key's limit (`rate-limiter-flexible`, in memory);
 * - the entry's key: SHA-256 of the RFC 8785 canonical form (`canonicalize`) of the account, the
 *   endpoint, the model and the body without `model` and `stream`, looked up in a Map;
 * - a hit answered with its stored text and a fresh id, `x-kmg-cache: hit` and `age`;
 * - a usage record (time, request id, key, account, endpoint, model, status, tokens, cost 0,
 *   `cache: hit`, the cost saved): 100 a batch, one prepared INSERT on the event loop, into SQLite
 *   (WAL) with the gateway's own schema, whose indexes and roll-ups the spec's request log and
 *   reports at a billion calls need (a batch left over at the end is not written);
 * - one pino log line to stdout; `kmg_cache_requests_total{outcome}` and a duration histogram.
 * A miss goes to UPSTREAM with one undici Pool, as the proxy floor does, and stores the answer
 * (whatever its status: the bench's mock answers 200).
 * No limits on tokens, no budgets, no security headers, no error shapes: what remains is the least
 * any gateway meeting the spec does for a hit. GET /healthz: 200.
 * Run: PORT=8084 UPSTREAM=http://127.0.0.1:8082 MODELS=bench-gpt=mock-gpt KEY_SHA256=<hex> node --import tsx bench/servers/hit-floor.ts
 */
import { hash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import Database from 'better-sqlite3';
import canonicalizeModule from 'canonicalize';
import Koa from 'koa';
import { pino } from 'pino';
import { Counter, Histogram, Registry } from 'prom-client';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { Pool } from 'undici';
import { openMigratedDatabase } from '../../reference-server/database.js';
import { readModelPairs } from '../lib/model-pairs.js';

const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

const port = Number(process.env.PORT ?? 8084);
const upstream = new Pool(process.env.UPSTREAM ?? 'http://127.0.0.1:8082');
const models = readModelPairs(process.env.MODELS);
const keys = new Map([[process.env.KEY_SHA256 ?? '', { id: 'key_floor', account: 'acct_floor' }]]);
/** The cached endpoints, each with its format's name and how its answers' ids begin. */
const PATHS = new Map([
  ['/v1/chat/completions', { endpoint: 'chatCompletions', idPrefix: 'chatcmpl-' }],
  ['/v1/messages', { endpoint: 'messages', idPrefix: 'msg_' }],
  ['/v1/responses', { endpoint: 'responses', idPrefix: 'resp_' }],
]);
const ID_PLACEHOLDER = 'kmg-hit-floor-id';
const BATCH = 100;

const logger = pino({ base: { service: 'hit-floor' } });
const registry = new Registry();
const cacheRequests = new Counter({ name: 'kmg_cache_requests_total', help: 'cache outcomes', labelNames: ['outcome'], registers: [registry] });
const durations = new Histogram({ name: 'kmg_request_seconds', help: 'model calls', labelNames: ['endpoint', 'status'], registers: [registry] });
const limiter = new RateLimiterMemory({ points: 1_000_000_000, duration: 60 });

// The gateway's own schema (its migrations): the indexes the request log reads and the roll-ups
// the reports read at scale come with every record. A directory of its own, removed on SIGTERM.
const databaseDir = mkdtempSync(join(tmpdir(), 'kmg-hit-floor-'));
const filename = join(databaseDir, 'gateway.sqlite');
await (await openMigratedDatabase({ client: 'sqlite', filename })).close();
const database = new Database(filename);
database.pragma('journal_mode = WAL');
database.pragma('synchronous = NORMAL');
/** The usage records of the batch under way, as the values of an insert of `BATCH` rows. */
let batch: unknown[] = [];
let inBatch = 0;
let insertBatch: Database.Statement | undefined;
function record(row: Record<string, unknown>): void {
  batch.push(...Object.values(row));
  if (++inBatch < BATCH) return;
  const columns = Object.keys(row);
  insertBatch ??= database.prepare(
    `INSERT INTO kmg_usage (${columns.join(', ')}) VALUES ${Array(BATCH)
      .fill(`(${columns.map(() => '?').join(', ')})`)
      .join(', ')}`,
  );
  const full = batch;
  batch = [];
  inBatch = 0;
  setImmediate(() => insertBatch?.run(full));
}

interface Entry {
  pieces: string[];
  storedAt: number;
  inputTokens: number;
  outputTokens: number;
}
const entries = new Map<string, Entry>();

const app = new Koa();
app.use(async function hitFloor(ctx) {
  if (ctx.path === '/healthz') {
    ctx.body = { status: 'ok' };
    return;
  }
  const cached = PATHS.get(ctx.path);
  if (ctx.method !== 'POST' || cached === undefined) return;
  const { endpoint, idPrefix } = cached;
  const started = performance.now();
  const requestId = `req_${randomUUID().replaceAll('-', '')}`;
  ctx.set('x-request-id', requestId);
  const secret = ctx.get('x-api-key') || ctx.get('authorization').slice('Bearer '.length);
  const key = keys.get(hash('sha256', secret));
  if (key === undefined) {
    ctx.status = 401;
    return;
  }
  const body = JSON.parse(await text(ctx.req)) as Record<string, unknown>;
  const { model: clientModel, stream: _stream, ...asked } = body;
  const model = typeof clientModel === 'string' ? models.get(clientModel) : undefined;
  if (model === undefined) {
    ctx.status = 404;
    return;
  }
  await limiter.consume(key.id);
  const name = hash('sha256', canonicalize([key.account, endpoint, clientModel, asked]) ?? '');
  let entry = entries.get(name);
  const outcome = entry ? 'hit' : 'miss';
  if (entry === undefined) {
    const answer = await upstream.request({
      path: ctx.path,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, model }),
    });
    const parsed = (await answer.body.json()) as { usage?: Record<string, number> };
    const usage = parsed.usage ?? {};
    entry = {
      pieces: JSON.stringify({ ...parsed, id: ID_PLACEHOLDER, model: clientModel }).split(ID_PLACEHOLDER),
      storedAt: Date.now(),
      inputTokens: usage.prompt_tokens ?? usage.input_tokens ?? 0,
      outputTokens: usage.completion_tokens ?? usage.output_tokens ?? 0,
    };
    entries.set(name, entry);
  }
  ctx.set('x-kmg-cache', outcome);
  ctx.set('age', String(Math.floor((Date.now() - entry.storedAt) / 1000)));
  ctx.type = 'application/json';
  ctx.body = entry.pieces.join(`${idPrefix}${randomUUID().replaceAll('-', '')}`);
  const now = Date.now();
  const seconds = (performance.now() - started) / 1000;
  record({
    time: now,
    day: now - (now % 86_400_000),
    request_id: requestId,
    key_id: key.id,
    account: key.account,
    endpoint: ctx.path,
    model: clientModel,
    provider: 'mock',
    status: 200,
    stream: 0,
    input_tokens: entry.inputTokens,
    output_tokens: entry.outputTokens,
    attachments: 0,
    latency_ms: seconds * 1000,
    cost_picousd: 0,
    cache: outcome,
    cost_saved_picousd: 0,
  });
  cacheRequests.inc({ outcome });
  durations.observe({ endpoint, status: '200' }, seconds);
  logger.info({ requestId, method: ctx.method, path: ctx.path, status: 200, model, cache: outcome, ms: seconds * 1000 }, 'request');
});

const server = app.listen(port, '127.0.0.1');
process.once('SIGTERM', () => {
  server.close(() => {
    database.close();
    rmSync(databaseDir, { recursive: true, force: true });
    process.exit(0);
  });
  server.closeIdleConnections();
  void upstream.close();
});
