import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { modelsApp } from '../helpers/models-app.js';

// Real sockets: the redirecting upstream, and another server where it points.
async function serve(handler: RequestListener) {
  const server = createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

// Another port is another origin: where a redirecting upstream would send the request.
const elsewhereSaw: IncomingHttpHeaders[] = [];
const elsewhere = await serve((req, res) => {
  elsewhereSaw.push(req.headers);
  res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"x","type":"message","content":[]}');
});
const redirecting = await serve((req, res) => {
  req.resume();
  res.writeHead(Number(req.url?.split('/')[1]), { location: `http://127.0.0.1:${elsewhere.port}/stolen` }).end();
});

const PROVIDER_KEY = 'sk-provider-never-elsewhere';
const statuses = [301, 302, 307, 308];
const gateway = await modelsApp({
  providers: statuses.flatMap((status) => [
    openAIProvider({ id: `openai-${status}`, baseURL: `http://127.0.0.1:${redirecting.port}/${status}`, apiKey: PROVIDER_KEY }),
    anthropicProvider({ id: `anthropic-${status}`, baseURL: `http://127.0.0.1:${redirecting.port}/${status}`, apiKey: PROVIDER_KEY }),
  ]),
  catalog: statuses.flatMap((status) => [
    { id: `gpt-${status}`, provider: `openai-${status}`, upstreamModel: 'gpt', created: 1 },
    { id: `claude-${status}`, provider: `anthropic-${status}`, upstreamModel: 'claude', created: 1 },
  ]),
});
test.after.always(() => Promise.all([gateway.close(), elsewhere.close(), redirecting.close()]));

for (const status of statuses) {
  test.serial(`an upstream answering ${status} is 502: the request, its PDF and the provider key never follow it`, async (t) => {
    const key = await gateway.keyFor();
    const chat = await gateway.post('/v1/chat/completions', { model: `gpt-${status}`, messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${key}` });
    t.is(chat.status, 502);
    t.deepEqual(await chat.json(), { error: { message: 'Upstream provider error', type: 'server_error', param: null, code: 'upstream_error' } });
    const messages = await gateway.post('/v1/messages', { model: `claude-${status}`, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': key });
    t.is(messages.status, 502);
    t.like(await messages.json(), { type: 'error', error: { type: 'api_error', message: 'Upstream provider error' } });
    t.deepEqual(elsewhereSaw, []);
    const [reported] = gateway.reported.slice(-1) as Array<{ cause?: unknown }>;
    t.is(reported?.cause, `provider 'anthropic-${status}' answered HTTP ${status}`, 'the log says what happened');
  });
}
