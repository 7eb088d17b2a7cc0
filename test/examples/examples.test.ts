import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import OpenAI, { toFile } from 'openai';
import { makePdf } from '../helpers/models-pdf.js';
import { startExample, type RunningExample } from '../helpers/server-example.js';
import { REDIS_URL, withRedis } from '../helpers/services.js';

const cleanups: Array<() => Promise<unknown>> = [];
test.after.always(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function start(file: string, env: Record<string, string> = {}, printsKey = true): Promise<RunningExample> {
  const example = await startExample(file, env, printsKey);
  cleanups.push(example.stop);
  return example;
}

const client = (example: RunningExample, apiKey = example.key as string) => new OpenAI({ apiKey, baseURL: `${example.url}/v1`, maxRetries: 0 });

function upload(example: RunningExample, pdf: Buffer) {
  const form = new FormData();
  form.set('purpose', 'user_data');
  form.set('file', new Blob([pdf], { type: 'application/pdf' }), 'a.pdf');
  return fetch(`${example.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${example.key}` }, body: form });
}

test('minimal-gateway: upload a PDF and ask the echo model about it, with the openai SDK and in Anthropic format', async (t) => {
  const example = await start('minimal-gateway.ts');
  const openai = client(example);
  const pdf = makePdf(2);
  const file = await openai.files.create({ file: await toFile(pdf, 'notes.pdf'), purpose: 'user_data' });
  const completion = await openai.chat.completions.create({
    model: 'echo-1',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          { type: 'file', file: { file_id: file.id } },
        ],
      },
    ],
  });
  t.regex(completion.choices[0]?.message.content ?? '', new RegExp(`notes\\.pdf, ${pdf.length} bytes, 2 pages`));
  t.deepEqual(
    (await openai.models.list()).data.map((model) => model.id),
    ['echo-1'],
  );

  const message = await fetch(`${example.url}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': example.key as string, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo-1', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }),
  });
  t.is(message.status, 200);
  const unauthenticated = await fetch(`${example.url}/v1/messages`, { method: 'POST' });
  t.is(unauthenticated.status, 401);
  t.like(await unauthenticated.json(), { type: 'error', error: { type: 'authentication_error' } });
});

test('files-on-knex: the five files endpoints on SQLite and a directory, and nothing else', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-example-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const example = await start('files-on-knex.ts', { FILES_DB: join(dir, 'files.sqlite'), FILES_DIR: join(dir, 'blobs') });
  const openai = client(example);
  const pdf = makePdf(1);
  const file = await openai.files.create({ file: await toFile(pdf, 'a.pdf'), purpose: 'user_data' });
  t.deepEqual(await readdir(join(dir, 'blobs')), [file.id]);
  t.deepEqual(
    (await openai.files.list()).data.map((entry) => entry.id),
    [file.id],
  );
  t.is((await openai.files.retrieve(file.id)).bytes, pdf.length);
  t.deepEqual(Buffer.from(await (await openai.files.content(file.id)).arrayBuffer()), pdf);
  t.true((await openai.files.delete(file.id)).deleted);
  await t.throwsAsync(openai.models.list(), { instanceOf: OpenAI.NotFoundError });
});

test('env-key-store: the keys of GATEWAY_KEYS are accepted, others refused', async (t) => {
  const first = `kmg_sk_${randomBytes(16).toString('hex')}`;
  const second = `kmg_sk_${randomBytes(16).toString('hex')}`;
  const example = await start('env-key-store.ts', { GATEWAY_KEYS: `acme=${first},globex=${second}` }, false);
  t.deepEqual(
    (await client(example, first).models.list()).data.map((model) => model.id),
    ['echo-1'],
  );
  t.deepEqual(
    (await client(example, second).models.list()).data.map((model) => model.id),
    ['echo-1'],
  );
  const completion = await client(example, first).chat.completions.create({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] });
  t.is(completion.object, 'chat.completion');
  await t.throwsAsync(client(example, 'kmg_sk_not-in-the-list').models.list(), { instanceOf: OpenAI.AuthenticationError });
});

const minuteOf = (ms: number) => Math.floor(ms / 60_000);

withRedis(test)('redis-limits: two processes share the per-minute creation limit', async (t) => {
  const pdf = makePdf(1);
  // The limit is per clock minute: a run straddling a minute's end counts in two windows. A run
  // takes far less than half a minute, so of two runs in a row one at most straddles one; that
  // run is done again, on fresh processes of a fresh account.
  for (let run = 1; run <= 2; run++) {
    const env = { REDIS_URL, DEMO_ACCOUNT: `demo-${randomBytes(4).toString('hex')}` };
    const [one, two] = await Promise.all([start('redis-limits.ts', env), start('redis-limits.ts', env)]);
    const startedAt = Date.now();
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await upload(i % 2 === 0 ? one : two, pdf)).status);
    const refused = await upload(two, pdf);
    if (minuteOf(Date.now()) !== minuteOf(startedAt)) continue;
    t.deepEqual(statuses, [...Array(10).fill(200), 429]);
    t.like(await refused.json(), { error: { code: 'rate_limit_exceeded' } });
    t.truthy(refused.headers.get('retry-after'));
    return;
  }
  t.fail('two runs in a row straddled the end of a minute');
});
