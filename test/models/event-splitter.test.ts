import test from 'ava';
import { GatewayError } from '../../lib/errors/gateway-error.js';
import { EventSplitter } from '../../lib/http/server-sent-events.js';

// The splitter every upstream event stream passes through: whole events, whatever the chunks,
// in linear time, and none larger than its limit.

/** The events of `text` cut into chunks of `size` bytes, each chunk's events and the end's in one list. */
function split(text: string, size: number, splitter = new EventSplitter()): string[] {
  const bytes = Buffer.from(text);
  const events: string[] = [];
  for (let start = 0; start < bytes.length; start += size) events.push(...splitter.push(bytes.subarray(start, start + size)));
  return [...events, ...splitter.end()];
}

test('events end at a blank line of any line end (\\n, \\r\\n, \\r), however the bytes are cut', (t) => {
  const text = 'data: a\n\nevent: b\r\ndata: é\r\n\r\ndata: c\r\rdata: d\n\r\ndata: rest';
  const events = ['data: a\n\n', 'event: b\r\ndata: é\r\n\r\n', 'data: c\r\r', 'data: d\n\r\n', 'data: rest'];
  for (const size of [1, 2, 3, 5, 1000]) t.deepEqual(split(text, size), events, `chunks of ${size} bytes`);
});

test('a \\r at the end of a chunk waits for the next: the \\n of its \\r\\n stays with its event', (t) => {
  const splitter = new EventSplitter();
  t.deepEqual(splitter.push('data: a\r\n\r'), []);
  t.deepEqual(splitter.push('\ndata: b\r'), ['data: a\r\n\r\n']);
  t.deepEqual(splitter.push('\rdata: c'), ['data: b\r\r']);
  t.deepEqual(splitter.push('\n\n'), ['data: c\n\n']);
});

test('one 20 MB event in 64 KiB chunks is split in linear time (a rescan on each chunk took seconds of CPU)', (t) => {
  const event = `data: {"text":"${'a'.repeat(20_000_000)}"}\n\n`;
  const before = process.cpuUsage();
  const events = split(event, 65_536);
  const cpu = process.cpuUsage(before);
  t.is(events.length, 1);
  t.is(events[0]?.length, event.length);
  // About 50 ms of CPU when linear, 6 s when rescanning: a bound far from both.
  t.true((cpu.user + cpu.system) / 1000 < 1500, `${(cpu.user + cpu.system) / 1000} ms of CPU`);
});

test('an event over maxEventBytes is refused with a 502 naming the limit, before more of it is kept', (t) => {
  const splitter = new EventSplitter({ maxEventBytes: 1000 });
  t.deepEqual(splitter.push(`data: ${'a'.repeat(992)}\n\n`), [`data: ${'a'.repeat(992)}\n\n`], 'an event of exactly the limit passes');
  t.deepEqual(splitter.push(`data: ${'b'.repeat(900)}`), []);
  const refused = t.throws(() => splitter.push('b'.repeat(200)), { any: true, instanceOf: GatewayError }) as GatewayError | undefined;
  t.is(refused?.status, 502);
  t.regex(refused?.message ?? '', /1000 bytes/);
  // The events a chunk completes before the one over the limit are passed on; the refusal comes next.
  const after = new EventSplitter({ maxEventBytes: 1000 });
  t.deepEqual(after.push(`data: a\n\ndata: ${'c'.repeat(1000)}`), ['data: a\n\n']);
  t.throws(() => after.end(), { any: true, instanceOf: GatewayError });
  // Bytes, not characters: 400 two-byte characters are 800 bytes.
  const wide = new EventSplitter({ maxEventBytes: 700 });
  t.throws(() => wide.push(`data: ${'é'.repeat(400)}`), { any: true, instanceOf: GatewayError });
});
