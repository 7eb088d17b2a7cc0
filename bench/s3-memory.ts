/**
 * Memory of S3BlobStore moving one file up and down, for files of growing size.
 *
 *   node --import tsx bench/s3-memory.ts [MiB ...]      (default: 8 64 512)
 *
 * Starts s3rver (the S3-compatible server the tests use) in this process, then for each size a
 * fresh child process that puts a generated file of that size through `S3BlobStore.put` and reads
 * it back through `get`, sampling its own RSS every 20 ms. Prints, per size, the RSS before and
 * how far each phase rose above it, with the throughput. Streams that do not hold the file show a
 * rise that stays flat as the size grows: about `partSize * (queueSize + 1)` for the upload, the
 * socket buffers for the download. The bytes are checked (SHA-256) on the way back.
 * BENCH_GC=1 collects garbage before every sample (slowly): the rise is then what is live, without
 * the garbage V8 lets pile up between its collections.
 */
import { fork } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { S3Client } from '@aws-sdk/client-s3';
import { newFileId } from '../lib/files/file-id.js';
import { S3BlobStore } from '../lib/stores/s3/blob-store.js';
import { startS3Server } from '../test/helpers/s3-server.js';
import { mib, num, table } from './lib/table.js';

const MiB = 1024 * 1024;
const SAMPLE_MS = 20;
const CHUNK = 64 * 1024;
const COLLECT_EACH_SAMPLE = process.env.BENCH_GC === '1';

interface Settings {
  endpoint: string;
  bucket: string;
  bytes: number;
}

interface Measured {
  bytes: number;
  baseline: number;
  uploadRise: number;
  downloadRise: number;
  uploadSeconds: number;
  downloadSeconds: number;
  intact: boolean;
}

/** `bytes` of a repeating pattern, made 64 KiB at a time as a socket delivers them. */
function generated(bytes: number, hash: ReturnType<typeof createHash>): Readable {
  return Readable.from(
    (function* () {
      for (let offset = 0; offset < bytes; offset += CHUNK) {
        const chunk = Buffer.alloc(Math.min(CHUNK, bytes - offset), (offset / CHUNK) % 251);
        hash.update(chunk);
        yield chunk;
      }
    })(),
  );
}

/** The highest RSS seen while `run` runs, sampled every SAMPLE_MS. */
async function peakDuring(run: () => Promise<void>): Promise<number> {
  let peak = process.memoryUsage.rss();
  const sampler = setInterval(() => {
    if (COLLECT_EACH_SAMPLE) global.gc?.();
    peak = Math.max(peak, process.memoryUsage.rss());
  }, SAMPLE_MS);
  try {
    await run();
  } finally {
    clearInterval(sampler);
  }
  return Math.max(peak, process.memoryUsage.rss());
}

const seconds = (since: bigint) => Number(process.hrtime.bigint() - since) / 1e9;

/** The child: one file up and down, measured. */
async function measure({ endpoint, bucket, bytes }: Settings): Promise<Measured> {
  const client = new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
  const store = new S3BlobStore({ client, bucket, prefix: 'bench/' });
  // Loads and warms every code path once, so that the baseline holds the code.
  const warm = newFileId(Date.now() / 1000);
  await store.put(warm, generated(6 * MiB, createHash('sha256')));
  for await (const chunk of (await store.get(warm)) ?? []) void chunk;
  await store.delete(warm);
  global.gc?.();
  const baseline = process.memoryUsage.rss();

  const id = newFileId(Date.now() / 1000);
  const sent = createHash('sha256');
  let started = process.hrtime.bigint();
  const uploadPeak = await peakDuring(async () => {
    await store.put(id, generated(bytes, sent));
  });
  const uploadSeconds = seconds(started);
  global.gc?.();

  const received = createHash('sha256');
  started = process.hrtime.bigint();
  const downloadPeak = await peakDuring(async () => {
    for await (const chunk of (await store.get(id)) ?? []) received.update(chunk as Buffer);
  });
  const downloadSeconds = seconds(started);
  await store.delete(id);
  client.destroy();
  return {
    bytes,
    baseline,
    uploadRise: uploadPeak - baseline,
    downloadRise: downloadPeak - baseline,
    uploadSeconds,
    downloadSeconds,
    intact: sent.digest('hex') === received.digest('hex'),
  };
}

async function inChild(settings: Settings): Promise<Measured> {
  const child = fork(fileURLToPath(import.meta.url), ['child'], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
  const result = once(child, 'message') as Promise<[Measured]>;
  child.send(settings);
  const [measured] = await result;
  await once(child, 'exit');
  return measured;
}

if (process.argv[2] === 'child') {
  const [settings] = (await once(process, 'message')) as [Settings];
  process.send?.(await measure(settings));
  process.disconnect();
} else {
  const sizes = process.argv.slice(2).map(Number);
  const s3 = await startS3Server();
  const rows: Measured[] = [];
  try {
    for (const size of sizes.length > 0 ? sizes : [8, 64, 512]) rows.push(await inChild({ endpoint: s3.endpoint, bucket: s3.bucket, bytes: size * MiB }));
  } finally {
    await s3.stop();
  }
  const speed = (row: Measured, time: number) => `${num(row.bytes / MiB / time, 0)} MiB/s`;
  console.log(
    table(rows, [
      { heading: 'file', cell: (row) => mib(row.bytes), align: 'right' },
      { heading: 'RSS before', cell: (row) => mib(row.baseline), align: 'right' },
      { heading: 'rise, put', cell: (row) => mib(row.uploadRise), align: 'right' },
      { heading: 'rise, get', cell: (row) => mib(row.downloadRise), align: 'right' },
      { heading: 'put', cell: (row) => speed(row, row.uploadSeconds), align: 'right' },
      { heading: 'get', cell: (row) => speed(row, row.downloadSeconds), align: 'right' },
      { heading: 'bytes back', cell: (row) => (row.intact ? 'identical' : 'DIFFERENT'), align: 'left' },
    ]),
  );
  if (rows.some((row) => !row.intact)) process.exitCode = 1;
}
