import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import test, { type ExecutionContext } from 'ava';
import { claimUploadsDir, removeStaleUploads } from '../../reference-server/stale-uploads.js';
import { until } from '../helpers/poll.js';

const tempName = () => `kmg-upload-${randomUUID()}`;
const MINUTE = 60_000;

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
 * own children, so the zombie is a shell's: `sleep 0` ends while its parent has become a `sleep`
 * that waits for nothing. The parent is killed when the test ends, and the zombie reaped by init.
 */
async function zombiePid(t: ExecutionContext): Promise<number> {
  const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void parent.kill());
  const [line] = (await once(createInterface({ input: parent.stdout }), 'line')) as [string];
  const pid = Number(line);
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

  t.is(await removeStaleUploads(dir, Date.now() + 4 * MINUTE), 0);
  t.is(await removeStaleUploads(dir, Date.now() + 6 * MINUTE), claims.length);
  t.deepEqual(await readdir(dir), []);
});

test('only upload temp files are removed: other files stay, in a claim and beside it', async (t) => {
  const dir = await uploadsDir(t);
  const mine = await claimUploadsDir(dir);
  const host = hostOf(mine.dir);
  await mine.release();
  const dead = await otherClaim(dir, host, await deadPid(), [tempName(), 'notes.txt']);
  const yesterday = new Date(Date.now() - 25 * 60 * MINUTE);
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
