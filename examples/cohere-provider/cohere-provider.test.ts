import { json } from 'node:stream/consumers';
import test from 'ava';
import { providerContract } from 'koa-model-gateway/testing';
import { cohereProvider } from './index.js';

// The upstream's own shapes: a Cohere-style chat answer, its events, its errors.
const event = (data: { type: string } & Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`;
const usage = { tokens: { input_tokens: 9, output_tokens: 3 } };

providerContract(test, {
  name: 'cohereProvider',
  create: (baseURL) => cohereProvider({ id: 'cohere', baseURL, apiKey: 'co-provider-key' }),
  upstream: {
    chatCompletions: {
      path: '/v2/chat',
      answer: { id: 'c1', finish_reason: 'COMPLETE', message: { role: 'assistant', content: [{ type: 'text', text: 'Hi there' }] }, usage },
      events: [
        event({ type: 'message-start', id: 'c1', delta: { message: { role: 'assistant' } } }),
        event({ type: 'content-delta', index: 0, delta: { message: { content: { text: 'Hi' } } } }),
        event({ type: 'content-delta', index: 0, delta: { message: { content: { text: ' there' } } } }),
        event({ type: 'message-end', delta: { finish_reason: 'COMPLETE', usage } }),
      ],
      error: (_status, message) => ({ message }),
      usage: { inputTokens: 9, outputTokens: 3 },
    },
  },
});

test('what the API cannot carry is refused by name, before anything is sent', async (t) => {
  const provider = cohereProvider({ id: 'cohere', baseURL: 'http://upstream.invalid' });
  const send = (body: Record<string, unknown>) => provider.chatCompletions?.({ body, headers: {}, signal: AbortSignal.timeout(60_000) });
  const refused = async (body: Record<string, unknown>) => {
    const answer = await send(body);
    if (answer === undefined || !('statusCode' in answer)) return undefined;
    return { status: answer.statusCode, param: ((await json(answer.body)) as { error: { param: string } }).error.param };
  };
  t.deepEqual(await refused({ model: 'command', messages: [{ role: 'user', content: 'hi' }], tools: [] }), { status: 400, param: 'tools' });
  t.deepEqual(await refused({ model: 'command', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x' } }] }] }), {
    status: 400,
    param: 'messages[0].content',
  });
});

test('bad options are refused when the provider is made, naming the setting', (t) => {
  t.throws(() => cohereProvider({ id: 'cohere', baseURL: 'ftp://x' }), {
    instanceOf: TypeError,
    message: 'cohereProvider(): baseURL must be an http:// or https:// URL',
  });
});
