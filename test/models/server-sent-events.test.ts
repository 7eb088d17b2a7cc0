import test from 'ava';
import { errors } from '../../lib/errors/gateway-error.js';
import { eventFields, EventSplitter, withData } from '../../lib/http/server-sent-events.js';
import { openAIErrorEvent } from '../../lib/models/formats/chat-completions/error-event.js';
import { anthropicErrorEvent } from '../../lib/models/formats/messages/error-event.js';

/** The events each chunk completes, then those of the end. */
function regroup(chunks: Array<string | Buffer>): string[][] {
  const splitter = new EventSplitter();
  return [...chunks.map((chunk) => splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)), splitter.end()];
}

test('whole events pass at once; a partial event waits for its end', (t) => {
  t.deepEqual(regroup(['data: 1\n\ndata: 2\n\n']), [['data: 1\n\n', 'data: 2\n\n'], []]);
  t.deepEqual(regroup(['data: 1\n\ndata: 2', '2\n', '\n']), [['data: 1\n\n'], [], ['data: 22\n\n'], []]);
  t.deepEqual(regroup(['event: a\r\ndata: 1\r\n\r\n', 'data: 2\r', '\n\r', '\n']), [['event: a\r\ndata: 1\r\n\r\n'], [], [], ['data: 2\r\n\r\n'], []]);
});

test('a multi-byte character split across chunks is kept whole', (t) => {
  const bytes = Buffer.from('data: "é€"\n\n');
  const events = regroup([...bytes].map((byte) => Buffer.of(byte))).flat();
  t.deepEqual(events, ['data: "é€"\n\n']);
});

test('what is left when the upstream ends normally is passed on as it is', (t) => {
  t.deepEqual(regroup(['data: 1\n\ndata: [DONE]\n']), [['data: 1\n\n'], ['data: [DONE]\n']]);
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

test('events split whatever their line ends; a rewritten event keeps its other fields', (t) => {
  t.deepEqual(regroup(['data: 1\n\nevent: a\r\ndata: 2\r\n\r\ndata: 3\r\rdata: [DONE]\n']), [
    ['data: 1\n\n', 'event: a\r\ndata: 2\r\n\r\n', 'data: 3\r\r'],
    ['data: [DONE]\n'],
  ]);
  t.deepEqual(eventFields('event:message_start\nid: 7\ndata: {"a":\ndata: 1}\n\n'), { name: 'message_start', data: '{"a":\n1}' });
  t.deepEqual(eventFields(': a comment\n\n'), { name: undefined, data: undefined });
  t.is(withData('event: message_start\r\nid: 7\r\ndata: {"old":1}\r\n\r\n', '{"new":2}'), 'event: message_start\nid: 7\ndata: {"new":2}\n\n');
});
