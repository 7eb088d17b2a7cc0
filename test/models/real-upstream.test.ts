import { once } from 'node:events';
import { createServer, request, type IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import test from 'ava';
import type { ProviderAnswer } from '../../lib/models/provider.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { modelsApp } from '../helpers/models-app.js';
import { streamingUpstream } from '../helpers/models-upstream.js';

// Real sockets: the upstream is a local server, or a port where nothing listens.
const upstream = await streamingUpstream();
const closed = createServer();
closed.listen(0, '127.0.0.1');
await once(closed, 'listening');
const closedPort = (closed.address() as AddressInfo).port;
await new Promise((resolve) => closed.close(resolve));

const gateway = await modelsApp({
  providers: [
    openAIProvider({ id: 'openai', baseURL: `${upstream.url}/v1`, apiKey: 'sk-provider' }),
    anthropicProvider({ id: 'anthropic', baseURL: upstream.url, apiKey: 'sk-provider' }),
    openAIProvider({ id: 'gone', baseURL: `http://127.0.0.1:${closedPort}/v1`, apiKey: 'sk-provider' }),
  ],
  catalog: [
    { id: 'gpt-test', provider: 'openai', upstreamModel: 'gpt-up', created: 1 },
    { id: 'claude-test', provider: 'anthropic', upstreamModel: 'claude-up', created: 1 },
    { id: 'gone-test', provider: 'gone', upstreamModel: 'gone-up', created: 1 },
  ],
});
test.after.always(() => Promise.all([gateway.close(), upstream.close()]));

for (const [path, model] of [
  ['/v1/chat/completions', 'gpt-test'],
  ['/v1/messages', 'claude-test'],
] as const) {
  test.serial(`${path}: a client that goes away mid-stream aborts the upstream request`, async (t) => {
    t.timeout(15_000, 'the upstream request was never aborted');
    const key = await gateway.keyFor();
    const client = request(`${gateway.url}${path}`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' } });
    client.end(JSON.stringify({ model, max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'hi' }] }));
    // The answer's status and headers go with its first event.
    const responded = once(client, 'response');
    const { req, res } = await upstream.next();
    const upstreamClosed = once(res, 'close');
    res.write('data: {"n":1}\n\n');
    const [response] = (await responded) as [IncomingMessage];
    const [first] = (await once(response, 'data')) as [Buffer];
    t.is(first.toString(), 'data: {"n":1}\n\n');
    t.false(req.destroyed);
    client.destroy();
    // Resolves only when the gateway has closed its connection to the upstream.
    await upstreamClosed;
    t.false(res.writableFinished, 'the upstream never finished its answer');
  });
}

test.serial('a client that goes away before the upstream answers aborts the upstream request too', async (t) => {
  t.timeout(15_000, 'the upstream request was never aborted');
  const key = await gateway.keyFor();
  const client = request(`${gateway.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
  client.on('error', () => undefined);
  client.end(JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }));
  const { res } = await upstream.next();
  const upstreamClosed = once(res, 'close');
  client.destroy();
  await upstreamClosed;
  t.pass();
});

test.serial('an upstream where nothing listens is 502, naming no address', async (t) => {
  const response = await gateway.post('/v1/chat/completions', { model: 'gone-test', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${await gateway.keyFor()}` });
  t.is(response.status, 502);
  t.deepEqual(await response.json(), { error: { message: 'Upstream provider error', type: 'server_error', param: null, code: 'upstream_error' } });
  const [reported] = gateway.reported.slice(-1) as Array<{ cause?: { code?: string } }>;
  t.is(reported?.cause?.code, 'ECONNREFUSED', 'the cause reaches the log');
});

test.serial("a provider's close() ends its keep-alive connections to the upstream", async (t) => {
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const sockets: Socket[] = [];
  server.on('connection', (socket: Socket) => sockets.push(socket));
  const provider = openAIProvider({ id: 'closing', baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` });
  const answer = await provider.chatCompletions?.({ body: { model: 'm' }, headers: {}, signal: new AbortController().signal });
  t.is((answer as ProviderAnswer | undefined)?.statusCode, 200);
  for await (const chunk of (answer as ProviderAnswer).body) t.truthy(chunk);
  t.is(sockets.length, 1);
  t.false(sockets[0]?.destroyed, 'kept alive for the next call');
  const socketClosed = once(sockets[0] as Socket, 'close');
  await provider.close?.();
  await socketClosed;
  await new Promise((resolve) => server.close(resolve));
});
