import test from 'ava';
import { errors } from '../../lib/errors/gateway-error.js';
import { anthropicErrorEvent, eventFields, openAIErrorEvent, splitEvents, wholeEvents, withData } from '../../lib/models/server-sent-events.js';

async function regroup(chunks: string[]): Promise<string[]> {
  const encoder = new TextEncoder();
  async function* source() {
    for (const chunk of chunks) yield encoder.encode(chunk);
  }
  const out: string[] = [];
  for await (const events of wholeEvents(source())) out.push(events);
  return out;
}

test('whole events pass at once; a partial event waits for its end', async (t) => {
  t.deepEqual(await regroup(['data: 1\n\ndata: 2\n\n']), ['data: 1\n\ndata: 2\n\n']);
  t.deepEqual(await regroup(['data: 1\n\ndata: 2', '2\n', '\n']), ['data: 1\n\n', 'data: 22\n\n']);
  t.deepEqual(await regroup(['event: a\r\ndata: 1\r\n\r\n', 'data: 2\r', '\n\r\n']), ['event: a\r\ndata: 1\r\n\r\n', 'data: 2\r\n\r\n']);
});

test('a multi-byte character split across chunks is kept whole', async (t) => {
  const bytes = new TextEncoder().encode('data: "é€"\n\n');
  async function* source() {
    for (const byte of bytes) yield Uint8Array.of(byte);
  }
  const out: string[] = [];
  for await (const events of wholeEvents(source())) out.push(events);
  t.deepEqual(out, ['data: "é€"\n\n']);
});

test('what is left when the upstream ends normally is passed on as it is', async (t) => {
  t.deepEqual(await regroup(['data: 1\n\ndata: [DONE]\n']), ['data: 1\n\n', 'data: [DONE]\n']);
});

test('error events carry the fields of the two error shapes', (t) => {
  t.is(
    openAIErrorEvent(errors.upstreamTimeout()),
    'data: {"error":{"message":"Upstream provider timed out","type":"server_error","param":null,"code":"upstream_timeout"}}\n\n',
  );
  t.is(
    anthropicErrorEvent(errors.upstreamError(), 'req_abc'),
    'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"Upstream provider error"},"request_id":"req_abc"}\n\n',
  );
});

test('a run of whole events splits into events, whatever their line ends; a rewritten event keeps its other fields', (t) => {
  t.deepEqual(splitEvents('data: 1\n\nevent: a\r\ndata: 2\r\n\r\ndata: 3\r\rdata: [DONE]\n'), [
    'data: 1\n\n',
    'event: a\r\ndata: 2\r\n\r\n',
    'data: 3\r\r',
    'data: [DONE]\n',
  ]);
  t.deepEqual(eventFields('event:message_start\nid: 7\ndata: {"a":\ndata: 1}\n\n'), { name: 'message_start', data: '{"a":\n1}' });
  t.deepEqual(eventFields(': a comment\n\n'), { name: undefined, data: undefined });
  t.is(withData('event: message_start\r\nid: 7\r\ndata: {"old":1}\r\n\r\n', '{"new":2}'), 'event: message_start\nid: 7\ndata: {"new":2}\n\n');
});
