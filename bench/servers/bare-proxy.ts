/**
 * The floor for the model proxy: bare Koa forwarding POST /v1/chat/completions, /v1/messages,
 * /v1/responses and /v1/embeddings to UPSTREAM with one keep-alive `undici` Pool. It reads the request body,
 * `JSON.parse`s it, rewrites `model` (MODELS, `client=upstream` pairs, comma-separated), sends it
 * with `pool.request()`, `JSON.parse`s the answer, rewrites its `model` back to the client's and
 * sends it as `ctx.body`: the least a gateway that reads its answers (for their usage) does. An
 * event stream is piped back as it comes. No authentication, no checks, no log.
 * FLOOR_ANSWER=pipe passes every answer back unparsed, as a stream (the floor before issue 34,
 * kept to show what that costs). GET /healthz: 200.
 * Run: PORT=8083 UPSTREAM=http://127.0.0.1:8082 MODELS=bench-gpt=mock-gpt node --import tsx bench/servers/bare-proxy.ts
 */
import { text } from 'node:stream/consumers';
import Koa from 'koa';
import { Pool } from 'undici';
import { readModelPairs } from '../lib/model-pairs.js';

const port = Number(process.env.PORT ?? 8083);
const upstream = new Pool(process.env.UPSTREAM ?? 'http://127.0.0.1:8082');
const models = readModelPairs(process.env.MODELS);
const parseAnswers = process.env.FLOOR_ANSWER !== 'pipe';
const PATHS = new Set(['/v1/chat/completions', '/v1/messages', '/v1/responses', '/v1/embeddings']);

const app = new Koa();
app.use(async function bareProxy(ctx) {
  if (ctx.path === '/healthz') {
    ctx.body = { status: 'ok' };
    return;
  }
  if (ctx.method !== 'POST' || !PATHS.has(ctx.path)) return;
  const body = JSON.parse(await text(ctx.req)) as { model?: unknown };
  const clientModel = body.model;
  const model = typeof clientModel === 'string' ? models.get(clientModel) : undefined;
  if (model === undefined) ctx.throw(404, 'unknown model');
  body.model = model;
  const answer = await upstream.request({ path: ctx.path, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  ctx.status = answer.statusCode;
  const type = answer.headers['content-type'];
  if (parseAnswers && typeof type === 'string' && type.startsWith('application/json')) {
    const parsed = (await answer.body.json()) as { model?: unknown };
    parsed.model = clientModel;
    ctx.body = parsed;
    return;
  }
  if (typeof type === 'string') ctx.type = type;
  // Koa pipes it with stream.pipeline, which reports its failures. A client that leaves makes Koa
  // destroy it too, which aborts the upstream request and raises that abort once more, on its own.
  answer.body.on('error', () => undefined);
  ctx.body = answer.body;
});

const server = app.listen(port, '127.0.0.1');
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
  void upstream.close();
});
