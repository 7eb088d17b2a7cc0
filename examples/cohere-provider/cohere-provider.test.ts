import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import type { ReadRequest } from 'koa-model-gateway/models';
import { providerContract } from 'koa-model-gateway/testing';
import { cohereProvider } from './index.js';

// The upstream's own shapes: a Cohere-style chat answer, its events, its errors.
const event = (data: { type: string } & Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;
const usage = { tokens: { input_tokens: 9, output_tokens: 3 } };

// Every client format reaches it through the neutral interface: the contract runs each.
providerContract(test, {
  name: 'cohereProvider',
  create: (baseURL) => cohereProvider({ id: 'cohere', baseURL, apiKey: 'co-provider-key' }),
  upstream: {
    neutral: {
      path: '/v2/chat',
      answer: { id: 'c1', finish_reason: 'COMPLETE', message: { role: 'assistant', content: [{ type: 'text', text: 'Hi there' }] }, usage },
      events: [
        event({ type: 'message-start', id: 'c1', delta: { message: { role: 'assistant' } } }),
        event({ type: 'content-start', index: 0, delta: { message: { content: { type: 'text', text: '' } } } }),
        event({ type: 'content-delta', index: 0, delta: { message: { content: { text: 'Hi' } } } }),
        event({ type: 'content-delta', index: 0, delta: { message: { content: { text: ' there' } } } }),
        event({ type: 'content-end', index: 0 }),
        event({ type: 'message-end', delta: { finish_reason: 'COMPLETE', usage } }),
      ],
      error: (_status, message) => ({ message }),
      usage: { inputTokens: 9, outputTokens: 3 },
    },
  },
});

/** A neutral request as a client format's reader gives it. */
const request = (fields: Partial<ReadRequest>): ReadRequest => ({
  model: 'command-a-03-2025',
  stream: false,
  system: [],
  messages: [{ role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
  tools: [],
  params: {},
  omitted: [],
  ...fields,
});

test('what the API cannot carry is refused by the client’s name for it, and hints are named as left out', (t) => {
  const { neutral } = cohereProvider({ id: 'cohere', baseURL: 'http://upstream.invalid' });
  const check = (fields: Partial<ReadRequest>) => neutral?.check?.(request(fields));
  t.throws(() => check({ reasoning: { effort: 'low' }, params: { reasoning: 'reasoning_effort' } }), { any: true, message: /'reasoning_effort'.*Cohere/ });
  t.throws(() => check({ messages: [{ role: 'user', parts: [{ type: 'image', source: { url: 'https://x' } }] }], params: { messages: 'messages' } }), {
    any: true,
    message: /'messages: a image part'/,
  });
  t.deepEqual(check({ user: 'u1', params: { user: 'safety_identifier' }, openAI: { prompt_cache_key: 'k' } }), ['safety_identifier', 'prompt_cache_key']);
});

test('tools: their definitions and results are sent, and the model’s call comes back as a neutral tool call', async (t) => {
  const sent: unknown[] = [];
  const upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      sent.push(JSON.parse(body));
      const call = { id: 'call_2', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'c2', finish_reason: 'TOOL_CALL', message: { role: 'assistant', tool_calls: [call] }, usage }));
    });
  });
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  t.teardown(() => upstream.close());
  const { neutral } = cohereProvider({ id: 'cohere', baseURL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` });
  const tool = { name: 'weather', description: 'The weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } };
  const answer = await neutral?.generate({
    request: request({
      tools: [tool],
      messages: [
        { role: 'user', parts: [{ type: 'text', text: 'Weather in Paris, then Oslo?' }] },
        { role: 'assistant', parts: [{ type: 'tool-call', id: 'call_1', name: 'weather', input: '{"city":"Paris"}' }] },
        { role: 'user', parts: [{ type: 'tool-result', callId: 'call_1', content: [{ type: 'text', text: '18C' }] }] },
      ],
    }),
    headers: {},
    signal: AbortSignal.timeout(60_000),
    maxBytes: 1024 * 1024,
  });
  t.like(sent[0], {
    tools: [{ type: 'function', function: tool }],
    messages: [
      { role: 'user', content: 'Weather in Paris, then Oslo?' },
      { role: 'assistant', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '18C' },
    ],
  });
  t.like(answer, { finishReason: 'tool-calls', content: [{ type: 'tool-call', id: 'call_2', name: 'weather', input: '{"city":"Oslo"}' }] });
});

test('bad options are refused when the provider is made, naming the setting', (t) => {
  t.throws(() => cohereProvider({ id: 'cohere', baseURL: 'ftp://x' }), {
    instanceOf: TypeError,
    message: 'cohereProvider(): baseURL must be an http:// or https:// URL',
  });
});
