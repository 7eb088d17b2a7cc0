import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import anyTest, { type TestFn } from 'ava';
import knexFactory from 'knex';
import { newFileId } from '../../lib/files/file-id.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { S3BlobStore } from '../../lib/stores/s3/blob-store.js';
import { pdfOf, uploadForm } from '../helpers/multipart.js';
import { withS3 } from '../helpers/s3-server.js';
import { throwawayPostgres, type ThrowawayDatabase } from '../helpers/server-database.js';
import { createKey, minuteAlignedClock, runCli, startServer, tempDataDir, type RunningServer } from '../helpers/server-process.js';
import { tcpProxy, type TcpProxy } from '../helpers/server-tcp-proxy.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

// The reference server's files in a bucket (an S3 server of the file's own): a start that cannot
// reach it, and the tested topology of docs/DEPLOYMENT.md, two reference servers (each with its own
// pools) on one PostgreSQL, one Redis and one bucket. Instance B reaches the bucket through a proxy
// that a test cuts.

interface Context {
  database: ThrowawayDatabase;
  proxy: TcpProxy;
  prefix: string;
  envs: [Record<string, string>, Record<string, string>];
  servers: [RunningServer, RunningServer];
}

const { test: s3Test, s3 } = await withS3(anyTest);
const test = withRedis(withPostgres(s3Test)) as TestFn<Context>;
const cleanups: Array<() => Promise<unknown>> = [];

/** `serve` with `env`, which must not start: its exit code and what it printed. */
async function refusesToStart(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const data = await tempDataDir();
  try {
    const { code, stderr } = await runCli(['serve'], { DATA_DIR: data.dir, PORT: '0', ...env });
    return { code, stderr };
  } finally {
    await data.remove();
  }
}

// A bad setting takes the one-line path of every ConfigError (test/server/lifecycle.test.ts).
s3Test('serve with a bucket that is not there, or a store that does not answer, stops with one line', async (t) => {
  const [noBucket, noServer] = await Promise.all([
    refusesToStart({ ...s3.env('x/'), BLOB_URL: 's3://no-such-bucket/x' }),
    refusesToStart({ ...s3.env('x/'), S3_ENDPOINT: 'http://127.0.0.1:1' }),
  ]);
  t.deepEqual(noBucket, { code: 1, stderr: `koa-model-gateway: cannot reach the bucket s3://no-such-bucket/x/ at ${s3.endpoint} (NotFound)\n` });
  t.deepEqual(noServer, { code: 1, stderr: 'koa-model-gateway: cannot reach the bucket s3://kmg-test/x/ at http://127.0.0.1:1 (ECONNREFUSED)\n' });
});

// Two instances on one bucket: the tests run one after the other on the servers the hook starts.

test.before(async (t) => {
  const [database, proxy, dataA, dataB] = await Promise.all([
    throwawayPostgres(),
    tcpProxy({ host: '127.0.0.1', port: s3.port }),
    tempDataDir(),
    tempDataDir(),
  ]);
  cleanups.push(database.drop, proxy.close, dataA.remove, dataB.remove);
  const prefix = s3.freshPrefix();
  const shared = { DATABASE_URL: database.url, REDIS_URL, ...s3.env(prefix) };
  t.context.envs = [
    { ...shared, DATA_DIR: dataA.dir },
    { ...shared, DATA_DIR: dataB.dir, S3_ENDPOINT: `http://127.0.0.1:${proxy.port}` },
  ];
  // The first start migrates the database: the second would wait for its lock. The creation rate
  // counts per clock minute: on a clock that starts one, no test straddles two.
  const nowMs = minuteAlignedClock();
  const first = await startServer(t.context.envs[0], { nowMs });
  cleanups.push(() => first.stop());
  const second = await startServer(t.context.envs[1], { nowMs });
  cleanups.push(() => second.stop());
  Object.assign(t.context, { database, proxy, prefix, servers: [first, second] });
});

test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A key of a new account, so that no two tests share the account's rates. */
async function newAccountKey(env: Record<string, string>): Promise<string> {
  return (await createKey(env, ['--account', `s3-${randomBytes(4).toString('hex')}`])).key;
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

function upload(server: RunningServer, key: string, pdf: Buffer): Promise<Response> {
  return fetch(`${server.url}/v1/files`, { method: 'POST', headers: auth(key), body: uploadForm(pdf) });
}

/** The ids of the blobs in the bucket under the deployment's prefix. */
async function bucketIds(prefix: string): Promise<string[]> {
  const listed = await s3.client().send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
  return (listed.Contents ?? []).map((object) => (object.Key ?? '').slice(prefix.length)).sort();
}

test.serial('a file uploaded through one instance is listed, downloaded byte for byte and deleted through the other', async (t) => {
  const [a, b] = t.context.servers;
  const key = await newAccountKey(t.context.envs[0]);
  // Larger than a part: the bytes go up to the bucket in a multipart upload.
  const pdf = Buffer.concat([pdfOf(1000), randomBytes(6 * 1024 * 1024)]);
  const created = await upload(a, key, pdf);
  t.is(created.status, 200);
  const { id } = (await created.json()) as { id: string };

  const listed = (await (await fetch(`${b.url}/v1/files`, { headers: auth(key) })).json()) as { data: Array<{ id: string; bytes: number }> };
  t.deepEqual(
    listed.data.map((file) => [file.id, file.bytes]),
    [[id, pdf.length]],
  );

  const download = await fetch(`${b.url}/v1/files/${id}/content`, { headers: auth(key) });
  t.is(download.status, 200);
  t.is(download.headers.get('content-length'), String(pdf.length));
  t.true(Buffer.from(await download.arrayBuffer()).equals(pdf));

  const deleted = await fetch(`${b.url}/v1/files/${id}`, { method: 'DELETE', headers: auth(key) });
  t.deepEqual(await deleted.json(), { id, object: 'file', deleted: true });
  t.is((await fetch(`${a.url}/v1/files/${id}`, { headers: auth(key) })).status, 404);
  t.is((await fetch(`${a.url}/v1/files/${id}/content`, { headers: auth(key) })).status, 404);
  t.false((await bucketIds(t.context.prefix)).includes(id), 'the bytes are gone from the bucket');
});

test.serial('50 parallel uploads by one account across both instances create exactly 10 files, and 10 blobs', async (t) => {
  const key = await newAccountKey(t.context.envs[0]);
  const before = await bucketIds(t.context.prefix);
  const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => upload(t.context.servers[i % 2] as RunningServer, key, pdfOf(2000 + i))));
  const codes: Record<string, number> = {};
  const created: string[] = [];
  for (const response of responses) {
    const body = (await response.json()) as { id?: string; error?: { code: string } };
    const code = response.status === 200 ? 'created' : (body.error?.code ?? String(response.status));
    codes[code] = (codes[code] ?? 0) + 1;
    if (body.id) created.push(body.id);
  }
  t.deepEqual(codes, { created: 10, rate_limit_exceeded: 40 });
  const listed = (await (await fetch(`${t.context.servers[1].url}/v1/files?order=asc`, { headers: auth(key) })).json()) as { data: Array<{ id: string }> };
  t.deepEqual(listed.data.map((file) => file.id).sort(), created.sort());
  t.deepEqual(await bucketIds(t.context.prefix), [...before, ...created].sort(), 'a refused upload writes nothing to the bucket');
});

test.serial('the sweep run from either instance removes expired files and orphaned blobs, once', async (t) => {
  const { database, prefix, envs } = t.context;
  const knex = knexFactory({ client: 'pg', connection: database.url });
  t.teardown(() => knex.destroy());
  const files = new KnexFileStore(knex);
  const blobs = new S3BlobStore({ client: s3.client(), bucket: s3.bucket, prefix });
  const now = Math.floor(Date.now() / 1000);
  const pdf = pdfOf(500);
  const file = async (expiresAt: number | null) => {
    const createdAt = now - 7200;
    const id = newFileId(createdAt);
    await blobs.put(id, Readable.from([pdf]));
    await files.create({ id, account: 'sweep', filename: 'a.pdf', bytes: pdf.length, createdAt, expiresAt }, { maxFiles: 100, maxBytes: 1e9 }, now);
    return id;
  };
  const expired = [await file(now - 3600), await file(now - 1)];
  const live = [await file(now + 3600), await file(null)];
  // Bytes without a record, as a crash between the two writes leaves them.
  const orphan = newFileId(now);
  await blobs.put(orphan, Readable.from([pdf]));
  const before = await bucketIds(prefix);

  // The orphan was just written: with no grace period it is old enough.
  const config = join(envs[0].DATA_DIR as string, 'no-grace.json');
  await writeFile(config, JSON.stringify({ sweep: { orphanGraceSeconds: 0 } }));
  const fromB = await runCli(['sweep', '--json'], { ...envs[1], GATEWAY_CONFIG: config });
  t.is(fromB.code, 0, fromB.stderr);
  t.deepEqual(JSON.parse(fromB.stdout), { expired: 2, orphans: 1, staleUploads: 0, usageRows: 0 });
  const fromA = await runCli(['sweep', '--json'], { ...envs[0], GATEWAY_CONFIG: config });
  t.deepEqual(JSON.parse(fromA.stdout), { expired: 0, orphans: 0, staleUploads: 0, usageRows: 0 });

  const gone = [...expired, orphan];
  t.deepEqual(
    await bucketIds(prefix),
    before.filter((id) => !gone.includes(id)),
  );
  t.deepEqual([...(await files.existing([...expired, ...live]))].sort(), live.sort());
});

test.serial('/readyz asks the bucket: while it does not answer, 503 for readiness and for file bytes; then both recover', async (t) => {
  const { proxy, servers, envs } = t.context;
  const [a, b] = servers;
  const key = await newAccountKey(envs[0]);
  const created = (await (await upload(a, key, pdfOf(3000))).json()) as { id: string };
  const ready = async () => {
    const response = await fetch(`${b.url}/readyz`);
    return { status: response.status, body: await response.json() };
  };
  const content = () => fetch(`${b.url}/v1/files/${created.id}/content`, { headers: auth(key) });
  t.deepEqual(await ready(), { status: 200, body: { status: 'ok', checks: { database: 'ok', blobs: 'ok', redis: 'ok' } } });

  await proxy.cut();
  t.deepEqual(await ready(), { status: 503, body: { status: 'unavailable', checks: { database: 'ok', blobs: 'unavailable', redis: 'ok' } } });
  const down = await content();
  t.is(down.status, 503);
  t.like(await down.json(), { error: { code: 'service_unavailable', message: 'Service temporarily unavailable' } });
  const refused = await upload(b, key, pdfOf(3000));
  t.is(refused.status, 503);
  t.is((await fetch(`${b.url}/v1/files`, { headers: auth(key) })).status, 200, 'a list reads no bytes');
  t.is((await fetch(`${b.url}/v1/files/${created.id}`, { headers: auth(key) })).status, 200, 'nor does a retrieve');
  t.is((await fetch(`${a.url}/v1/files/${created.id}/content`, { headers: auth(key) })).status, 200, 'the other instance is unaffected');

  await proxy.restore();
  t.is((await ready()).status, 200);
  const back = await content();
  t.is(back.status, 200);
  t.true(Buffer.from(await back.arrayBuffer()).equals(pdfOf(3000)));
  // The upload refused while the bucket was away spent nothing: 9 of the minute's 10 are left.
  const statuses = [];
  for (let i = 0; i < 10; i++) statuses.push((await upload(b, key, pdfOf(100))).status);
  t.deepEqual(statuses, [...Array(9).fill(200), 429]);
});
