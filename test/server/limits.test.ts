import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { makePdf } from '../helpers/models-pdf.js';
import { createKey, minuteAlignedClock, startServer, tempDataDir, type RunningServer } from '../helpers/server-process.js';

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function deployment(config: unknown) {
  const data = await tempDataDir();
  cleanups.push(data.remove);
  const configPath = join(data.dir, 'gateway.json');
  await writeFile(configPath, JSON.stringify(config));
  return { DATA_DIR: data.dir, GATEWAY_CONFIG: configPath };
}

// The creation rate counts per clock minute: on a clock that starts one, no test straddles two.
const nowMs = minuteAlignedClock();

async function serve(env: Record<string, string>): Promise<RunningServer> {
  const server = await startServer(env, { nowMs });
  cleanups.push(() => server.stop());
  return server;
}

function upload(server: RunningServer, key: string, pdf: Buffer) {
  const form = new FormData();
  form.set('purpose', 'user_data');
  form.set('file', new Blob([pdf], { type: 'application/pdf' }), 'a.pdf');
  return fetch(`${server.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
}

async function errorOf(response: Response) {
  return ((await response.json()) as { error: { code: string } }).error.code;
}

const account = () => `acct-${randomBytes(4).toString('hex')}`;

test('the limits of the config file replace the spec defaults', async (t) => {
  const env = await deployment({ limits: { createsPerMinute: 2, maxFiles: 1, maxFileBytes: 4096 } });
  const stocked = await createKey(env, ['--account', account()]);
  const rated = await createKey(env, ['--account', account()]);
  const server = await serve(env);
  const pdf = makePdf(1);

  const tooLarge = await upload(server, stocked.key, makePdf(1, 5000));
  t.is(tooLarge.status, 413);
  t.is(await errorOf(tooLarge), 'file_too_large');

  t.is((await upload(server, stocked.key, pdf)).status, 200);
  const full = await upload(server, stocked.key, pdf);
  t.is(full.status, 429);
  t.is(full.headers.get('x-should-retry'), 'false');
  t.is(await errorOf(full), 'storage_quota_exceeded');

  // A delete frees the stock but gives no creation back: the third creation of the minute is refused.
  for (let i = 0; i < 2; i++) {
    const file = (await (await upload(server, rated.key, pdf)).json()) as { id: string };
    await fetch(`${server.url}/v1/files/${file.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${rated.key}` } });
  }
  const third = await upload(server, rated.key, pdf);
  t.is(third.status, 429);
  t.is(await errorOf(third), 'rate_limit_exceeded');
  const retryAfter = Number(third.headers.get('retry-after'));
  t.true(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60);
});
