import test from 'ava';
import { countPdfPages } from '../../lib/models/providers/echo/received.js';
import { modelsApp } from '../helpers/models-app.js';
import { makePdf } from '../helpers/models-pdf.js';

const gateway = await modelsApp();
test.after.always(() => gateway.close());

/** The `data:` payloads of an event stream, with their event names. */
function parseEvents(text: string): Array<{ event: string | undefined; data: string }> {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const lines = block.split('\n');
      return {
        event: lines.find((line) => line.startsWith('event: '))?.slice(7),
        data: lines.filter((line) => line.startsWith('data: ')).map((line) => line.slice(6)).join('\n'),
      };
    });
}

test('countPdfPages counts page objects, not the page tree', (t) => {
  t.is(countPdfPages(makePdf(1)), 1);
  t.is(countPdfPages(makePdf(7)), 7);
  t.is(countPdfPages(Buffer.from('%PDF-1.4\n1 0 obj <</Type/Page>> endobj 2 0 obj <</Type/Pages/Count 1>> endobj')), 1);
  t.is(countPdfPages(Buffer.from('not a pdf')), 0);
});

test('chat completions: echo answers in OpenAI format with each attached document described', async (t) => {
  const key = await gateway.keyFor();
  const pdf = makePdf(3, 1000);
  const fileId = await gateway.storePdf(pdf, { filename: 'quarterly.pdf' });
  const response = await gateway.post(
    '/v1/chat/completions',
    {
      model: 'echo-1',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'What is in this file?' }, { type: 'file', file: { file_id: fileId } }] },
      ],
    },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 200);
  t.regex(response.headers.get('x-request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);
  const body = (await response.json()) as { object: string; model: string; choices: Array<{ message: { role: string; content: string }; finish_reason: string }> };
  t.is(body.object, 'chat.completion');
  t.is(body.model, 'echo-1');
  t.is(body.choices[0]?.message.role, 'assistant');
  t.is(body.choices[0]?.finish_reason, 'stop');
  t.is(
    body.choices[0]?.message.content,
    [
      'Echo from echo-upstream-1: received 2 messages.',
      'The last user message says: "What is in this file?"',
      `Document 1: quarterly.pdf, ${pdf.length} bytes, 3 pages.`,
    ].join('\n'),
  );
});

test('chat completions: the same request gets the same answer', async (t) => {
  const key = await gateway.keyFor();
  const request = { model: 'echo-1', messages: [{ role: 'user', content: 'hello there' }] };
  const first = (await (await gateway.post('/v1/chat/completions', request, { authorization: `Bearer ${key}` })).json()) as Record<string, unknown>;
  const second = (await (await gateway.post('/v1/chat/completions', request, { authorization: `Bearer ${key}` })).json()) as Record<string, unknown>;
  t.deepEqual({ ...first, created: 0 }, { ...second, created: 0 });
  t.like(first, { usage: { prompt_tokens: 2, completion_tokens: 17, total_tokens: 19 } });
});

test('chat completions: echo streams chunks ending in [DONE]', async (t) => {
  const key = await gateway.keyFor();
  const response = await gateway.post(
    '/v1/chat/completions',
    { model: 'echo-1', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] },
    { authorization: `Bearer ${key}` },
  );
  t.is(response.status, 200);
  t.regex(response.headers.get('content-type') ?? '', /^text\/event-stream/);
  t.is(response.headers.get('cache-control'), 'no-cache');
  t.regex(response.headers.get('x-request-id') ?? '', /^req_/);
  const events = parseEvents(await response.text());
  t.is(events.at(-1)?.data, '[DONE]');
  const chunks = events.slice(0, -1).map((event) => JSON.parse(event.data) as { object: string; choices: Array<{ delta: { content?: string }; finish_reason: string | null }>; usage?: unknown });
  t.true(chunks.every((chunk) => chunk.object === 'chat.completion.chunk'));
  const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
  t.is(text, 'Echo from echo-upstream-1: received 1 message.\nThe last user message says: "hi"\nNo documents are attached.');
  t.is(chunks.at(-2)?.choices[0]?.finish_reason, 'stop');
  t.like(chunks.at(-1), { choices: [], usage: { prompt_tokens: 1 } });
});

test('messages: echo answers in Anthropic format, titling the document with its stored name', async (t) => {
  const key = await gateway.keyFor();
  const pdf = makePdf(2);
  const fileId = await gateway.storePdf(pdf, { filename: 'contract.pdf' });
  const response = await gateway.post(
    '/v1/messages',
    {
      model: 'echo-1',
      max_tokens: 100,
      messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }, { type: 'text', text: 'Summarise.' }] }],
    },
    { 'x-api-key': key, 'anthropic-version': '2023-06-01' },
  );
  t.is(response.status, 200);
  t.regex(response.headers.get('request-id') ?? '', /^req_[A-Za-z0-9]{32}$/);
  const body = (await response.json()) as { type: string; role: string; stop_reason: string; content: Array<{ type: string; text: string }> };
  t.like(body, { type: 'message', role: 'assistant', stop_reason: 'end_turn', model: 'echo-1' });
  t.deepEqual(body.content, [
    {
      type: 'text',
      text: [
        'Echo from echo-upstream-1: received 1 message.',
        'The last user message says: "Summarise."',
        `Document 1: contract.pdf, ${pdf.length} bytes, 2 pages.`,
      ].join('\n'),
    },
  ]);
});

test('messages: echo streams the Anthropic event sequence', async (t) => {
  const key = await gateway.keyFor();
  const response = await gateway.post(
    '/v1/messages',
    { model: 'echo-1', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': key },
  );
  t.is(response.status, 200);
  t.regex(response.headers.get('request-id') ?? '', /^req_/);
  const events = parseEvents(await response.text());
  t.deepEqual(
    events.map((event) => event.event),
    ['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
  );
  for (const event of events) t.is((JSON.parse(event.data) as { type: string }).type, event.event ?? '');
  const text = events
    .filter((event) => event.event === 'content_block_delta')
    .map((event) => (JSON.parse(event.data) as { delta: { text: string } }).delta.text)
    .join('');
  t.is(text, 'Echo from echo-upstream-1: received 1 message.\nThe last user message says: "hi"\nNo documents are attached.');
});

test('echo refuses a body without messages as an upstream would: 400 with its message', async (t) => {
  const key = await gateway.keyFor();
  const chat = await gateway.post('/v1/chat/completions', { model: 'echo-1' }, { authorization: `Bearer ${key}` });
  t.is(chat.status, 400);
  t.deepEqual(await chat.json(), { error: { message: "'messages' must be an array", type: 'invalid_request_error', param: null, code: 'upstream_error' } });
  const messages = await gateway.post('/v1/messages', { model: 'echo-1' }, { 'x-api-key': key });
  t.is(messages.status, 400);
  t.like(await messages.json(), { type: 'error', error: { type: 'invalid_request_error', message: 'messages: Field required' } });
});

test('messages: a document inside a tool_result is resolved too', async (t) => {
  const key = await gateway.keyFor();
  const pdf = makePdf(5);
  const fileId = await gateway.storePdf(pdf, { filename: 'tool-output.pdf' });
  const response = await gateway.post(
    '/v1/messages',
    {
      model: 'echo-1',
      max_tokens: 100,
      messages: [
        { role: 'user', content: 'Fetch the report.' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'fetch', input: {} }] },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'document', source: { type: 'file', file_id: fileId } }] }],
        },
      ],
    },
    { 'x-api-key': key },
  );
  t.is(response.status, 200);
  const body = (await response.json()) as { content: Array<{ text: string }> };
  t.true(body.content[0]?.text.endsWith(`Document 1: tool-output.pdf, ${pdf.length} bytes, 5 pages.`));
});
