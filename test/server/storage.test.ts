import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Readable, type Writable } from 'node:stream';
import test, { type ExecutionContext } from 'ava';
import knexFactory from 'knex';
import { newFileId } from '../../lib/files/file-id.js';
import { FsBlobStore } from '../../lib/stores/fs/blob-store.js';
import { KnexFileStore } from '../../lib/stores/knex/file-store.js';
import { KnexKeyStore } from '../../lib/stores/knex/key-store.js';
import { migrate } from '../../lib/stores/knex/migrations.js';
import { sqliteWriter, SqliteWriterGoneError } from '../../lib/stores/knex/sqlite-writer.js';
import { KnexUsageStore } from '../../lib/stores/knex/usage-store.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { openMigratedDatabase, type DatabaseOptions } from '../../reference-server/database.js';
import { claimUploadsDir, removeStaleUploads } from '../../reference-server/stale-uploads.js';
import { makePdf } from '../helpers/models-pdf.js';
import { until } from '../helpers/poll.js';
import { runCli, startServer, tempDataDir } from '../helpers/server-process.js';

// The data on the server's disk: the embedded SQLite database, the sweep of expired files and
// orphaned blobs, and the upload temp files that a process left behind.

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

// The embedded database.

async function embedded(options: DatabaseOptions = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-db-'));
  const filename = join(dir, 'gateway.sqlite');
  const database = await openMigratedDatabase({ client: 'sqlite', filename }, options);
  return { filename, database, remove: () => rm(dir, { recursive: true, force: true }) };
}

test('the embedded SQLite database runs in WAL mode, synced at checkpoints (synchronous = NORMAL), waiting on locks', async (t) => {
  const { database, remove } = await embedded();
  try {
    const pragma = async (name: string) => ((await database.knex.raw(`pragma ${name}`)) as Array<Record<string, unknown>>)[0];
    t.deepEqual(await pragma('journal_mode'), { journal_mode: 'wal' });
    t.deepEqual(await pragma('synchronous'), { synchronous: 1 });
    t.deepEqual(await pragma('busy_timeout'), { timeout: 5000 });
  } finally {
    await database.close();
    await remove();
  }
});

/** The file descriptors of this process open on `filename`. */
async function openOn(filename: string): Promise<number> {
  const fds = await readdir('/proc/self/fd');
  const targets = await Promise.all(fds.map((fd) => readlink(join('/proc/self/fd', fd)).catch(() => '')));
  return targets.filter((target) => target === filename).length;
}

(process.platform === 'linux' ? test : test.skip)('the embedded database reads through a connection of its own, closed with the rest', async (t) => {
  const { filename, database, remove } = await embedded();
  try {
    const keys = new KnexKeyStore(database.knex, database.storeOptions);
    await keys.create({ account: 'acme', hash: 'a'.repeat(64), scopes: ['files:read'], models: null, expiresAt: null });
    t.like(await keys.findByHash('a'.repeat(64)), { account: 'acme' });
    t.is(await openOn(filename), 2, "Knex's connection and the reader");
    await database.close();
    t.is(await openOn(filename), 0);
  } finally {
    await remove();
  }
});

(process.platform === 'linux' ? test : test.skip)(
  'with writerCheckpointMs, commits leave the WAL to a writer thread, which copies it into the database, reports read on a thread of their own, and both close with the rest',
  async (t) => {
    const { filename, database, remove } = await embedded({ writerCheckpointMs: 20 });
    try {
      const { knex } = database;
      t.deepEqual(((await knex.raw('pragma wal_autocheckpoint')) as unknown[])[0], { wal_autocheckpoint: 0 }, 'no checkpoint inside a commit');
      await knex.schema.createTable('filler', (table) => table.text('text'));
      const before = (await stat(filename)).size;
      // 1 MiB in the WAL: 256 pages, below SQLite's own threshold of 1,000, so only the worker copies it.
      for (let i = 0; i < 16; i++) await knex('filler').insert({ text: 'x'.repeat(65_536) });
      await until(
        async () => (await stat(filename)).size,
        (size) => size >= before + 1_048_576,
      );
      t.true((await stat(filename)).size >= before + 1_048_576, 'the rows reached the database file');
      const usage = new KnexUsageStore(knex, database.storeOptions);
      await usage.insert([usageRecord()]);
      t.is((await usage.list()).length, 1, 'the usage store writes through the writer');
      t.like((await usage.summarize({}, 'day'))[0], { requests: 1 }, 'and sums through the report reader');
      t.is(await openOn(filename), 4, "Knex's connection, the reader, the writer's and the report reader's");
      await database.close();
      t.is(await openOn(filename), 0);
    } finally {
      await remove();
    }
  },
);

test('a writer thread that fails is reported once, and the writes sent to it fail as not run', async (t) => {
  const failures: Error[] = [];
  const writer = sqliteWriter(join(tmpdir(), 'kmg-no-such-dir', 'gateway.sqlite'), { checkpointIntervalMs: 20, onFailure: (err) => failures.push(err) });
  await t.throwsAsync(writer.prepare('insert into t values (?)')([1]), { instanceOf: SqliteWriterGoneError });
  await writer.close();
  t.is(failures.length, 1);
  t.regex(String(failures[0]?.message), /directory does not exist/);
});

// The sweep.

/** An hour, in seconds as the file records count time. */
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
    usage: new KnexUsageStore(knex),
    /** A file created `age` seconds ago that expires `expiresAfter` seconds after its creation. */
    async file(age: number, expiresAfter: number | null) {
      const createdAt = now() - age;
      const id = newFileId(createdAt);
      await blobs.put(id, Readable.from([pdf]));
      const record = {
        id,
        account: 'acme',
        filename: 'a.pdf',
        bytes: pdf.length,
        createdAt,
        expiresAt: expiresAfter === null ? null : createdAt + expiresAfter,
      };
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
  // Usage records kept 30 days by default, their roll-ups 400.
  const pastRetention = usageRecord({ time: Date.now() - 31 * 24 * HOUR * 1000 });
  const recent = usageRecord({ time: Date.now() - 29 * 24 * HOUR * 1000 });
  await data.usage.insert([pastRetention, recent]);

  const result = await runCli(['sweep', '--json'], data.env);
  t.is(result.code, 0, result.stderr);
  t.deepEqual(JSON.parse(result.stdout), { expired: 1, orphans: 1, staleUploads: 1, usageRows: 1 });
  t.deepEqual(
    (await data.usage.list()).map((record) => record.requestId),
    [recent.requestId],
  );
  t.is((await data.usage.summarize({}, 'key'))[0]?.requests, 2, 'the reports still count the record pruned');
  t.deepEqual((await readdir(uploads)).sort(), [inProgress, 'operator-notes.txt'].sort());
  const left = await readdir(data.filesDir);
  t.deepEqual(left.sort(), [live, forever, youngOrphan].sort());
  t.false(left.includes(expired) || left.includes(oldOrphan));

  const again = await runCli(['sweep'], data.env);
  t.is(again.stdout, 'Removed 0 expired file(s), 0 orphaned blob(s), 0 stale upload(s) and 0 usage row(s) past their retention\n');
});

test('the server sweeps on its own interval', async (t) => {
  const data = await embeddedData();
  const config = join(data.env.DATA_DIR, 'gateway.json');
  await writeFile(config, JSON.stringify({ sweep: { intervalSeconds: 1, orphanGraceSeconds: 60 } }));
  const orphan = await data.orphan(HOUR);
  const expired = await data.file(2 * HOUR, HOUR);
  const server = await startServer({ ...data.env, GATEWAY_CONFIG: config });
  cleanups.push(() => server.stop());

  const line = await until(
    async () => server.logs.find((entry) => entry.msg === 'sweep'),
    (found) => found !== undefined,
    { intervalMs: 100, attempts: 200 },
  );
  t.like(line, { expired: 1, orphans: 1 });
  const left = await readdir(data.filesDir);
  t.false(left.includes(orphan) || left.includes(expired));
});

// The upload temp files: each process claims a directory of its own.

const tempName = () => `kmg-upload-${randomUUID()}`;
/** A minute, in milliseconds as the claims' heartbeats count time. */
const MINUTE_MS = 60_000;

async function uploadsDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-stale-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A PID no process holds: that of a child that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await once(child, 'exit');
  return child.pid as number;
}

/** A claim directory as another process would have made it, holding `files`. */
async function otherClaim(dir: string, host: string, pid: number, files: string[]): Promise<string> {
  const claim = join(dir, `claim.${host}.${pid}.${'0'.repeat(16)}`);
  await mkdir(claim);
  for (const name of files) await writeFile(join(claim, name), 'partial upload');
  return claim;
}

const hostOf = (claimDir: string) => basename(claimDir).split('.')[1] ?? '';

test('a claim of a dead process on this host is removed at once; a live one is kept', async (t) => {
  const dir = await uploadsDir(t);
  const mine = await claimUploadsDir(dir);
  t.teardown(() => mine.release());
  const host = hostOf(mine.dir);
  t.not(host, 'unknown', 'this test runs where /proc tells the host');
  const inFlight = tempName();
  await writeFile(join(mine.dir, inFlight), 'uploading');
  const leftover = tempName();
  const dead = await otherClaim(dir, host, await deadPid(), [leftover]);
  const parent = await otherClaim(dir, host, process.ppid, [tempName()]);

  t.is(await removeStaleUploads(dir), 1);
  t.deepEqual(await readdir(mine.dir), [inFlight]);
  t.is((await readdir(parent)).length, 1, 'another live process on this host keeps its claim');
  t.false((await readdir(dir)).includes(basename(dead)), 'the dead claim is gone, its directory too');
});

/**
 * The PID of a zombie: a process that has exited and that its parent never reaps. Node reaps its
 * own children, so the zombie is a shell's: its background `head` waits for a byte on fd 3 while
 * the shell becomes a `sleep`, which waits for nothing; the byte is sent only once the shell is
 * `sleep` (a shell could still reap it). The parent is killed when the test ends, and the zombie
 * reaped by init.
 */
async function zombiePid(t: ExecutionContext): Promise<number> {
  const parent = spawn('sh', ['-c', 'head -c 1 <&3 >/dev/null & echo $!; exec sleep 30 3<&-'], { stdio: ['ignore', 'pipe', 'inherit', 'pipe'] });
  t.teardown(() => void parent.kill());
  const [line] = (await once(createInterface({ input: parent.stdout as Readable }), 'line')) as [string];
  const pid = Number(line);
  const command = () => readFile(`/proc/${parent.pid}/comm`, 'utf8');
  t.is(await until(command, (name) => name === 'sleep\n'), 'sleep\n', 'the shell has become a sleep');
  (parent.stdio[3] as Writable).end('x');
  const state = async () => {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0];
  };
  t.is(await until(state, (value) => value === 'Z'), 'Z', 'the child has become a zombie');
  return pid;
}

test('a claim of a zombie process (exited, not yet reaped) on this host is removed at once', async (t) => {
  const dir = await uploadsDir(t);
  const mine = await claimUploadsDir(dir);
  t.teardown(() => mine.release());
  const zombie = await otherClaim(dir, hostOf(mine.dir), await zombiePid(t), [tempName()]);

  t.is(await removeStaleUploads(dir), 1);
  t.false((await readdir(dir)).includes(basename(zombie)));
});

test('a claim untouched for five minutes is taken for dead, wherever its owner ran', async (t) => {
  const dir = await uploadsDir(t);
  const mine = await claimUploadsDir(dir);
  await mine.release();
  const claims = [
    // Another host or PID namespace: the kernel cannot tell.
    await otherClaim(dir, `${'f'.repeat(32)}-1`, process.pid, [tempName()]),
    await otherClaim(dir, 'unknown', 1, [tempName()]),
    // This host, its PID now another process's.
    await otherClaim(dir, hostOf(mine.dir), process.ppid, [tempName()]),
  ];

  t.is(await removeStaleUploads(dir, Date.now() + 4 * MINUTE_MS), 0);
  t.is(await removeStaleUploads(dir, Date.now() + 6 * MINUTE_MS), claims.length);
  t.deepEqual(await readdir(dir), []);
});

test('only upload temp files are removed: other files stay, in a claim and beside it', async (t) => {
  const dir = await uploadsDir(t);
  const mine = await claimUploadsDir(dir);
  const host = hostOf(mine.dir);
  await mine.release();
  const dead = await otherClaim(dir, host, await deadPid(), [tempName(), 'notes.txt']);
  const yesterday = new Date(Date.now() - 25 * 60 * MINUTE_MS);
  const looseOld = tempName();
  const looseYoung = tempName();
  for (const name of [looseOld, looseYoung, 'backup.tar', 'kmg-upload-not-a-uuid']) {
    await writeFile(join(dir, name), 'x');
    if (name !== looseYoung) await utimes(join(dir, name), yesterday, yesterday);
  }

  t.is(await removeStaleUploads(dir), 2);
  t.deepEqual(await readdir(dead), ['notes.txt'], 'a claim holding another file keeps it, and stays');
  t.deepEqual((await readdir(dir)).sort(), [basename(dead), 'backup.tar', 'kmg-upload-not-a-uuid', looseYoung].sort());
});

test('release removes the claim with what is left in it', async (t) => {
  const dir = await uploadsDir(t);
  const claim = await claimUploadsDir(dir);
  await writeFile(join(claim.dir, tempName()), 'x');
  await claim.release();
  t.deepEqual(await readdir(dir), []);
});
