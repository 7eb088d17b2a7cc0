import { readdir, readFile, writeFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import test from 'ava';
import { translation } from '../../lib/models/formats/translate.js';
import type { Provider, ProviderEndpoint } from '../../lib/models/provider.js';
import { EventSplitter } from '../../lib/http/server-sent-events.js';

// The conformance table: each test/fixtures/translation/*.case.json is a request in the client's
// format and the request the provider must get in its own; the provider's answer (JSON, or a
// recorded event stream) and what the client must get back. The upstream's bytes arrive in
// pieces of 7 bytes, so that events, lines and characters are cut everywhere.
// UPDATE_FIXTURES=1 writes the expected answers of new cases, to be read before they are kept.

const DIR = new URL('../../../test/fixtures/translation/', import.meta.url);

interface Case {
  reproduces: string;
  client: ProviderEndpoint;
  provider: ProviderEndpoint;
  request: Record<string, unknown>;
  upstreamRequest: Record<string, unknown>;
  upstreamAnswer?: Record<string, unknown>;
  answer?: Record<string, unknown>;
  upstreamEvents?: string;
  events?: string;
}

const pieces = (text: string) => {
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += 7) out.push(bytes.subarray(at, at + 7));
  return out;
};

// What differs from run to run: the clock, and the item ids a Responses answer is given.
const normalized = (text: string) =>
  text.replace(/"(created|created_at)":\d+/g, '"$1":0').replace(/"(msg|fc|rs)_[0-9a-f]{24}"/g, '"$1_ID"');

const events = (text: string) => new EventSplitter().push(text).map((event) => event.trim());

const files = (await readdir(DIR)).filter((name) => name.endsWith('.case.json')).sort();
const fixtures = await Promise.all(files.map(async (file) => [file, JSON.parse(await readFile(new URL(file, DIR), 'utf8')) as Case] as const));

for (const [file, fixture] of fixtures) {
  test(`${file}: ${fixture.reproduces}`, async (t) => {
    let sent: unknown;
    const upstreamText = fixture.upstreamEvents ? await readFile(new URL(fixture.upstreamEvents, DIR), 'utf8') : JSON.stringify(fixture.upstreamAnswer);
    const provider: Provider = {
      id: 'upstream',
      [fixture.provider]: async ({ body }: { body: unknown }) => {
        sent = body;
        const type = fixture.upstreamEvents ? 'text/event-stream' : 'application/json';
        return { statusCode: 200, headers: { 'content-type': type }, body: Readable.from(pieces(upstreamText)) };
      },
    };
    const translated = translation(fixture.client, provider);
    if (translated === undefined) return t.fail(`no translation from ${fixture.client} to ${fixture.provider}`);
    t.is(translated.target, fixture.provider);
    t.notThrows(() => translated.check(fixture.request, {}));
    const answer = await translated.send({ body: fixture.request, headers: {}, signal: new AbortController().signal });
    t.deepEqual(sent, fixture.upstreamRequest, 'the request the provider gets');
    const chunks: Buffer[] = [];
    for await (const chunk of answer.body) chunks.push(Buffer.from(chunk as Buffer));
    const text = normalized(Buffer.concat(chunks).toString('utf8'));
    if (fixture.upstreamEvents) {
      const expectedFile = new URL(fixture.events ?? '', DIR);
      if (process.env.UPDATE_FIXTURES && !(await readFile(expectedFile, 'utf8').catch(() => ''))) await writeFile(expectedFile, text);
      t.deepEqual(events(text), events(await readFile(expectedFile, 'utf8')), 'the events the client gets');
    } else {
      if (process.env.UPDATE_FIXTURES && fixture.answer === undefined) {
        await writeFile(new URL(file, DIR), `${JSON.stringify({ ...fixture, answer: JSON.parse(text) as unknown }, null, 2)}\n`);
      }
      t.deepEqual(JSON.parse(text), fixture.answer, 'the answer the client gets');
    }
  });
}
