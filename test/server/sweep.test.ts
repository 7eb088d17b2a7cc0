import { randomUUID } from 'node:crypto';
import { mkdir, readdir, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import test from 'ava';
import knexFactory from 'knex';
import { newFileId } from '../../lib/files/file-id.js';
import { FsBlobStore } from '../../lib/stores/fs/blob-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { makePdf } from '../helpers/models-pdf.js';
import { runCli, startServer, tempDataDir } from '../helpers/server-process.js';

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

const HOUR = 3600;
const now = () => Math.floor(Date.now() / 1000);

/** The data dir of the embedded default, with stores opened on it the way the server opens them. */
async function embeddedData() {
  const data = await tempDataDir();
  cleanups.push(data.remove);
  const knex = knexFactory({ client: 'better-sqlite3', connection: { filename: join(data.dir, 'gateway.sqlite') }, useNullAsDefault: true });
  cleanups.push(() => knex.destroy());
  await migrate(knex);
  const filesDir = join(data.dir, 'files');
  const files = new KnexFileStore(knex);
  const blobs = new FsBlobStore({ directory: filesDir });
  const pdf = makePdf(1);
  return {
    env: { DATA_DIR: data.dir },
    filesDir,
    /** A file created `age` seconds ago that expires `expiresAfter` seconds after its creation. */
    async file(age: number, expiresAfter: number | null) {
      const createdAt = now() - age;
      const id = newFileId(createdAt);
      await blobs.put(id, Readable.from([pdf]));
      const record = { id, account: 'acme', filename: 'a.pdf', bytes: pdf.length, createdAt, expiresAt: expiresAfter === null ? null : createdAt + expiresAfter };
      await files.create(record, { maxFiles: 1000, maxBytes: 100_000_000 }, createdAt);
      return id;
    },
    /** Bytes without a record, as a crash between writing them and inserting the record leaves, `age` seconds old. */
    async orphan(age: number) {
      const id = newFileId(now() - age);
      await blobs.put(id, Readable.from([pdf]));
      const when = new Date((now() - age) * 1000);
      await utimes(join(filesDir, id), when, when);
      return id;
    },
  };
}

test('sweep removes expired files, old orphaned blobs and stale upload temp files, and nothing else', async (t) => {
  const data = await embeddedData();
  const uploads = join(data.env.DATA_DIR, 'uploads');
  await mkdir(uploads, { recursive: true });
  // Loose temp files, as a version before the per-process directories left them.
  const leftByACrash = `kmg-upload-${randomUUID()}`;
  const inProgress = `kmg-upload-${randomUUID()}`;
  const yesterday = new Date(Date.now() - 25 * HOUR * 1000);
  for (const name of [leftByACrash, inProgress, 'operator-notes.txt']) {
    await writeFile(join(uploads, name), 'partial upload');
    if (name !== inProgress) await utimes(join(uploads, name), yesterday, yesterday);
  }
  const expired = await data.file(2 * HOUR, HOUR);
  const live = await data.file(2 * HOUR, 3 * HOUR);
  const forever = await data.file(2 * HOUR, null);
  const oldOrphan = await data.orphan(2 * HOUR);
  const youngOrphan = await data.orphan(60);

  const result = await runCli(['sweep', '--json'], data.env);
  t.is(result.code, 0, result.stderr);
  t.deepEqual(JSON.parse(result.stdout), { expired: 1, orphans: 1, staleUploads: 1 });
  t.deepEqual((await readdir(uploads)).sort(), [inProgress, 'operator-notes.txt'].sort());
  const left = await readdir(data.filesDir);
  t.deepEqual(left.sort(), [live, forever, youngOrphan].sort());
  t.false(left.includes(expired) || left.includes(oldOrphan));

  const again = await runCli(['sweep'], data.env);
  t.is(again.stdout, 'Removed 0 expired file(s), 0 orphaned blob(s) and 0 stale upload(s)\n');
});

test('the server sweeps on its own interval', async (t) => {
  const data = await embeddedData();
  const config = join(data.env.DATA_DIR, 'gateway.json');
  await writeFile(config, JSON.stringify({ sweep: { intervalSeconds: 1, orphanGraceSeconds: 60 } }));
  const orphan = await data.orphan(HOUR);
  const expired = await data.file(2 * HOUR, HOUR);
  const server = await startServer({ ...data.env, GATEWAY_CONFIG: config });
  cleanups.push(() => server.stop());

  let line;
  for (let attempt = 0; attempt < 200 && !line; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    line = server.logs.find((entry) => entry.msg === 'sweep');
  }
  t.like(line, { expired: 1, orphans: 1 });
  const left = await readdir(data.filesDir);
  t.false(left.includes(orphan) || left.includes(expired));
});
