/**
 * The baseline: Koa with nothing in front, answering what the gateway answers, the cheapest way.
 * GET /v1/files/<id> answers a fixed file object; POST /v1/files pipes the request body straight
 * to a file in UPLOAD_DIR (no parsing, no checks); with `?fsync=1` the file is flushed to disk
 * before the answer, as the gateway's FsBlobStore does. GET /healthz: 200.
 * Run: PORT=8081 UPLOAD_DIR=/tmp/x node --import tsx bench/servers/bare-koa.ts
 */
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import Koa from 'koa';

const port = Number(process.env.PORT ?? 8081);
const uploadDir = process.env.UPLOAD_DIR ?? '';

const FILE_OBJECT = {
  id: 'file-0123456789abcdefghijklmnopqrstuv',
  object: 'file',
  bytes: 26_214_400,
  created_at: 1_744_000_000,
  filename: 'report.pdf',
  purpose: 'user_data',
  status: 'processed',
};

const app = new Koa();
app.use(async function bare(ctx) {
  if (ctx.method === 'GET' && ctx.path.startsWith('/v1/files/')) {
    ctx.body = FILE_OBJECT;
  } else if (ctx.method === 'POST' && ctx.path === '/v1/files' && uploadDir !== '') {
    const path = join(uploadDir, randomUUID());
    await pipeline(ctx.req, createWriteStream(path, { flush: ctx.query.fsync === '1' }));
    ctx.body = { ...FILE_OBJECT, bytes: ctx.request.length ?? 0 };
  } else if (ctx.path === '/healthz') {
    ctx.body = { status: 'ok' };
  }
});

const server = app.listen(port, '127.0.0.1');
process.once('SIGTERM', () => server.close(() => process.exit(0)));
