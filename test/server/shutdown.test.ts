import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { request, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import test from 'ava';
import { makePdf } from '../helpers/models-pdf.js';
import { removeStaleUploads } from '../../reference-server/stale-uploads.js';
import { createKey, spawnServer, startServer, tempDataDir, uploadFiles, type RunningServer } from '../helpers/server-process.js';

const dirs: Array<{ remove(): Promise<void> }> = [];
test.after.always(() => Promise.all(dirs.map((dir) => dir.remove())));

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * An upload whose body is sent in two halves: the first half now, the second when the test says.
 * Resolves `response` with the status, headers and body text, or rejects when the connection is cut.
 */
function splitUpload(server: RunningServer, key: string, pdf: Buffer) {
  const boundary = `kmg${randomBytes(8).toString('hex')}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slow.pdf"\r\nContent-Type: application/pdf\r\n\r\n`),
    pdf,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const half = Math.floor(body.length / 2);
  const req = request(`${server.url}/v1/files`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': `multipart/form-data; boundary=${boundary}`,
      'content-length': String(body.length),
    },
  });
  const response = new Promise<{ status: number; headers: IncomingMessage['headers']; text: string }>((resolve, reject) => {
    req.once('error', reject);
    req.once('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.once('error', reject);
    });
  });
  req.write(body.subarray(0, half));
  return { response, finish: () => req.end(body.subarray(half)) };
}

async function serverWithKey(env: Record<string, string> = {}) {
  const data = await tempDataDir();
  dirs.push(data);
  const base = { DATA_DIR: data.dir, ...env };
  const { key } = await createKey(base, ['--account', 'acme']);
  return { env: base, key, server: await spawnServer(base), blobs: join(data.dir, 'files') };
}

test('SIGTERM during an upload: the upload finishes, new connections are refused, the process exits 0', async (t) => {
  const { env, key, server } = await serverWithKey();
  const pdf = makePdf(1, 256 * 1024);
  const upload = splitUpload(server, key, pdf);
  // The first half is being streamed to its temp file: the request is in flight.
  await until(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');

  server.child.kill('SIGTERM');
  await until(() => server.logs.some((line) => line.msg === 'shutting down'), 'the shutdown to begin');
  await t.throwsAsync(fetch(`${server.url}/healthz`), undefined, 'no new connection is accepted');

  upload.finish();
  const response = await upload.response;
  t.is(response.status, 200, response.text);
  t.is(response.headers.connection, 'close');
  const file = JSON.parse(response.text) as { id: string; bytes: number };
  t.is(file.bytes, pdf.length);
  t.is(await server.exited, 0);
  t.deepEqual(await readdir(join(env.DATA_DIR, 'uploads')), [], 'no temp file is left, nor the server\'s uploads directory');

  // The file was stored: a new server on the same data serves it.
  const again = await startServer(env);
  try {
    const content = await fetch(`${again.url}/v1/files/${file.id}/content`, { headers: { authorization: `Bearer ${key}` } });
    t.deepEqual(Buffer.from(await content.arrayBuffer()), pdf);
  } finally {
    await again.stop();
  }
});

test('SIGTERM during an upload that outlasts the grace period: the connection is cut and nothing is left behind', async (t) => {
  const { env, key, server, blobs } = await serverWithKey({ SHUTDOWN_GRACE_SECONDS: '1' });
  const upload = splitUpload(server, key, makePdf(1, 256 * 1024));
  await until(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');

  server.child.kill('SIGTERM');
  // The second half is never sent.
  await t.throwsAsync(upload.response);
  t.is(await server.exited, 0);
  t.truthy(server.logs.find((line) => line.msg === 'shutdown grace period over: closing remaining connections'));
  t.deepEqual(await readdir(join(env.DATA_DIR, 'uploads')), [], 'no temp file is left, nor the server\'s uploads directory');
  t.deepEqual(await readdir(blobs), [], 'no blob is left');
});

test('SIGINT stops an idle server at once, closing keep-alive connections', async (t) => {
  const { key, server } = await serverWithKey();
  const response = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
  t.is(response.status, 200);
  await response.arrayBuffer();
  server.child.kill('SIGINT');
  t.is(await server.exited, 0);
  t.truthy(server.logs.find((line) => line.msg === 'stopped'));
  await t.throwsAsync(fetch(`${server.url}/healthz`));
});

test('SIGKILL during an upload: the next start removes its temp file, and no sweep touches a live server\'s upload', async (t) => {
  const { env, key, server } = await serverWithKey();
  const killed = splitUpload(server, key, makePdf(1, 256 * 1024));
  killed.response.catch(() => undefined);
  await until(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');
  const [leftover] = await uploadFiles(env.DATA_DIR);
  server.child.kill('SIGKILL');
  await server.exited;

  const next = await spawnServer(env);
  try {
    t.deepEqual(await uploadFiles(env.DATA_DIR), [], 'the start removed the dead process\'s temp file');
    t.truthy(next.logs.find((line) => line.msg === 'removed the temp files of uploads cut short by a crash' && line.staleUploads === 1), leftover);
    const pdf = makePdf(1, 256 * 1024);
    const live = splitUpload(next, key, pdf);
    await until(async () => (await uploadFiles(env.DATA_DIR)).length > 0, 'the upload to start');
    // A sweep from another process, as the `sweep` command runs one.
    t.is(await removeStaleUploads(join(env.DATA_DIR, 'uploads')), 0);
    live.finish();
    const response = await live.response;
    t.is(response.status, 200, response.text);
    t.like(JSON.parse(response.text), { bytes: pdf.length });
  } finally {
    await next.stop();
  }
});

test('stop() called again while stopping shuts the server down once', async (t) => {
  const temp = await tempDataDir();
  dirs.push(temp);
  const server = await startServer({ DATA_DIR: join(temp.dir, 'data') });
  const codes = await Promise.all([server.stop(), server.stop()]);
  t.deepEqual(codes, [0, 0]);
  t.is(server.logs.filter((line) => line.msg === 'shutting down').length, 1);
  t.is(server.logs.filter((line) => line.msg === 'stopped').length, 1);
});
