/**
 * Peak memory of a server receiving 20 parallel 25 MiB PDF uploads.
 *
 *   npx tsx bench/upload-memory.ts [uploads=20] [bytes=26214400] [--node-flag ...]
 *
 * Starts the files API (openAIErrors + apiKey + filesRouter on KnexFileStore/SQLite and
 * FsBlobStore) in a child process, sends the uploads at once from this one, each from its own
 * account so no kept limit refuses, and prints the server's RSS (sampled, and the kernel's peak)
 * and the throughput. The target is a peak under 128 MiB.
 *
 * The server runs as JavaScript compiled by tsc, as in production: under tsx, its loader thread
 * alone adds some 30 MiB to the process. Arguments starting with `--` are Node flags for the
 * server, e.g. `--max-semi-space-size=1`: most of the peak is garbage (socket and file buffers)
 * that a smaller young generation frees sooner.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Koa from 'koa';
import knexFactory from 'knex';
import { apiKey } from '../lib/auth/api-key.js';
import { createApiKey } from '../lib/auth/keys.js';
import { openAIErrors } from '../lib/errors/openai-errors.js';
import { filesRouter } from '../lib/files/files-router.js';
import { FsBlobStore } from '../lib/stores/fs/blob-store.js';
import { KnexFileStore } from '../lib/stores/knex/file-store.js';
import { migrate } from '../lib/stores/knex/migrations.js';
import { MemoryKeyStore } from '../lib/stores/memory/key-store.js';

const MiB = 1024 * 1024;
const SAMPLE_MS = 20;

type ToParent = { ready: { url: string; keys: string[] } } | { rss: number } | { peak: { maxRss: number } };

/** The server side, in the child process. */
async function serve(uploads: number): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-bench-'));
  const knex = knexFactory({ client: 'better-sqlite3', connection: { filename: join(dir, 'files.db') }, useNullAsDefault: true });
  await migrate(knex);
  const keyStore = new MemoryKeyStore();
  const keys: string[] = [];
  for (let i = 0; i < uploads; i++) {
    keys.push((await createApiKey(keyStore, { prefix: 'kmg', account: `bench-${i}`, scopes: ['files:write'] })).key);
  }
  const router = filesRouter({
    files: new KnexFileStore(knex),
    blobs: new FsBlobStore({ directory: join(dir, 'blobs') }),
    tempDir: dir,
  });
  const app = new Koa();
  app
    .use(openAIErrors())
    .use(apiKey({ store: keyStore }))
    .use(router.routes())
    .use(router.allowedMethods({ throw: true }));
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const send = (message: ToParent) => process.send?.(message);
  const sampler = setInterval(() => send({ rss: process.memoryUsage.rss() }), SAMPLE_MS);
  send({ ready: { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, keys } });
  process.once('message', async () => {
    clearInterval(sampler);
    // resourceUsage().maxRSS is the kernel's high-water mark, in KiB: no peak slips between samples.
    send({ peak: { maxRss: process.resourceUsage().maxRSS * 1024 } });
    server.close();
    await knex.destroy();
    await rm(dir, { recursive: true, force: true });
    process.disconnect();
  });
}

/** A multipart upload of a `bytes`-byte PDF, built once and sent by every request. */
function uploadBody(bytes: number): { body: Buffer; contentType: string } {
  const boundary = '----kmgbench';
  const pdf = Buffer.alloc(bytes, 0x20);
  pdf.write('%PDF-1.7\n');
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.pdf"\r\nContent-Type: application/pdf\r\n\r\n`;
  return {
    body: Buffer.concat([Buffer.from(head), pdf, Buffer.from(`\r\n--${boundary}--\r\n`)]),
    contentType: `multipart/form-data; boundary=${boundary}`,
  };
}

function post(url: string, key: string, upload: { body: Buffer; contentType: string }): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': upload.contentType, 'content-length': upload.body.length },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(upload.body);
  });
}

/**
 * Compiles this file and what it imports into node_modules/.cache (inside the package, so that
 * its dependencies resolve), returning the compiled path of this file.
 */
async function compileServer(): Promise<string> {
  const root = dirname(dirname(fileURLToPath(import.meta.url)));
  const outDir = join(root, 'node_modules', '.cache', 'kmg-bench');
  await mkdir(outDir, { recursive: true });
  // node_modules is a package boundary: without its own package.json the output would be CommonJS.
  await writeFile(join(outDir, 'package.json'), '{ "type": "module" }\n');
  const tsconfig = join(outDir, 'tsconfig.json');
  await writeFile(
    tsconfig,
    JSON.stringify({
      extends: join(root, 'tsconfig.json'),
      compilerOptions: { rootDir: root, outDir, noEmit: false, declaration: false, sourceMap: false, inlineSources: false },
      include: [fileURLToPath(import.meta.url)],
    }),
  );
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', tsconfig], { stdio: 'inherit' });
  return join(outDir, 'bench', 'upload-memory.js');
}

function nextMessage(child: ChildProcess): Promise<ToParent> {
  return new Promise((resolve) => child.once('message', (message) => resolve(message as ToParent)));
}

/** The client side: starts the server, uploads, reports. */
async function run(uploads: number, bytes: number, nodeFlags: string[]): Promise<void> {
  const child = fork(await compileServer(), ['serve', String(uploads)], {
    execArgv: nodeFlags,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let sampledPeak = 0;
  let baseline = 0;
  child.on('message', (message: ToParent) => {
    if ('rss' in message) sampledPeak = Math.max(sampledPeak, message.rss);
  });
  let ready: ToParent;
  do ready = await nextMessage(child);
  while (!('ready' in ready));
  const { url, keys } = ready.ready;
  const idle = await nextMessage(child);
  if ('rss' in idle) baseline = idle.rss;

  const upload = uploadBody(bytes);
  const started = process.hrtime.bigint();
  const statuses = await Promise.all(keys.map((key) => post(url, key, upload)));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;

  child.send('done');
  let peak: ToParent;
  do peak = await nextMessage(child);
  while (!('peak' in peak));
  await once(child, 'exit');

  const failed = statuses.filter((status) => status !== 200);
  const mib = (value: number) => `${(value / MiB).toFixed(1)} MiB`;
  console.log(`${uploads} parallel uploads of ${bytes.toLocaleString('en')} bytes: ${failed.length === 0 ? 'all 200' : `non-200: ${failed.join(', ')}`}`);
  if (nodeFlags.length > 0) console.log(`server Node flags: ${nodeFlags.join(' ')}`);
  console.log(`server RSS idle:         ${mib(baseline)}`);
  console.log(`server RSS peak sampled: ${mib(sampledPeak)} (every ${SAMPLE_MS} ms)`);
  console.log(`server RSS peak (maxRSS): ${mib(peak.peak.maxRss)}`);
  console.log(`throughput: ${((uploads * bytes) / MiB / seconds).toFixed(1)} MiB/s (${seconds.toFixed(2)} s)`);
  if (failed.length > 0) process.exitCode = 1;
}

if (process.argv[2] === 'serve') {
  await serve(Number(process.argv[3]));
} else {
  const args = process.argv.slice(2);
  const [uploads = '20', bytes = '26214400'] = args.filter((arg) => !arg.startsWith('--'));
  await run(
    Number(uploads),
    Number(bytes),
    args.filter((arg) => arg.startsWith('--')),
  );
}
