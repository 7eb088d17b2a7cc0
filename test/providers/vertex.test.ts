import test from 'ava';
import { GoogleAuth, OAuth2Client } from 'google-auth-library';
import { createProvider } from '../../lib/models/providers/registry.js';
import { vertexProvider } from '../../lib/models/providers/vertex/index.js';
import { modelsApp, type ModelsApp } from '../helpers/models-app.js';
import { reply, scriptedUpstream, type ScriptedUpstream } from '../helpers/models-upstream.js';

// The vertex kind: Gemini's protocol on Vertex AI's publisher paths, with access tokens from
// google-auth-library (a GoogleAuth over an OAuth2Client whose refresh handler stands in for
// Google's token endpoint), against the same kind of mock as the gemini kind's.

const MODEL = 'gemini-2.5-pro';
const BASE = `/v1/projects/my-project/locations/europe-west4/publishers/google/models/${MODEL}`;

let upstream: ScriptedUpstream;
let gateway: ModelsApp;
let key: string;
const refreshes: number[] = [];
// An OAuth2Client refreshes its token with this handler when it has none or it is about to expire.
const client = new OAuth2Client();
client.refreshHandler = async () => {
  refreshes.push(refreshes.length + 1);
  return { access_token: `token-${refreshes.length}`, expiry_date: Date.now() + 3_600_000 };
};
const auth = new GoogleAuth({ authClient: client });
test.before(async () => {
  upstream = await scriptedUpstream();
  gateway = await modelsApp({
    catalog: [
      { id: 'pro', provider: 'vertex', upstreamModel: MODEL },
      { id: 'vectors', provider: 'vertex', upstreamModel: 'text-embedding-005', type: 'embeddings' },
      { id: 'gemini-vectors', provider: 'vertex', upstreamModel: 'gemini-embedding-001', type: 'embeddings' },
    ],
    providers: [vertexProvider({ id: 'vertex', project: 'my-project', location: 'europe-west4', baseURL: upstream.url, auth })],
  });
  key = await gateway.keyFor();
});
test.after.always(() => Promise.all([gateway?.close(), upstream?.close()]));

const answer = (text: string) => ({
  candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP', index: 0 }],
  usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2, totalTokenCount: 5 },
  modelVersion: MODEL,
});
const chat = () => gateway.post('/v1/chat/completions', { model: 'pro', messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${key}` });

test.serial("a call reaches Vertex AI's publisher path with the library's token, cached between calls and refreshed once expired", async (t) => {
  upstream.answer(`${BASE}:generateContent`, reply(200, answer('One.')), 2);
  t.is((await chat()).status, 200);
  t.is((await chat()).status, 200);
  t.deepEqual(
    upstream.received.map((request) => [request.path, request.headers.authorization]),
    [
      [`${BASE}:generateContent`, 'Bearer token-1'],
      [`${BASE}:generateContent`, 'Bearer token-1'],
    ],
  );
  // The token has expired: the library refreshes it before the next call.
  client.credentials = { ...client.credentials, expiry_date: Date.now() - 1000 };
  upstream.answer(`${BASE}:generateContent`, reply(200, answer('Two.')));
  t.is((await chat()).status, 200);
  t.is(upstream.received.at(-1)?.headers.authorization, 'Bearer token-2');
});

test.serial('a stream goes to streamGenerateContent on the publisher path too, and a 429 is a 429 with its retry delay', async (t) => {
  upstream.answer(`${BASE}:streamGenerateContent?alt=sse`, (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`data: ${JSON.stringify(answer('Streamed.'))}\r\n\r\n`);
  });
  const streamed = await gateway.post(
    '/v1/messages',
    { model: 'pro', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] },
    { 'x-api-key': key },
  );
  t.regex(await streamed.text(), /Streamed\./);
  upstream.answer(
    `${BASE}:generateContent`,
    reply(429, {
      error: {
        code: 429,
        message: 'Quota exceeded',
        status: 'RESOURCE_EXHAUSTED',
        details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '30s' }],
      },
    }),
  );
  const throttled = await chat();
  t.is(throttled.status, 429);
  t.is(throttled.headers.get('retry-after'), '30');
});

test.serial("embeddings by predict, with the answers' token counts; a Gemini embedding model one text a call", async (t) => {
  const PREDICT = '/v1/projects/my-project/locations/europe-west4/publishers/google/models';
  const prediction = (value: number) => ({ embeddings: { values: [value, 1], statistics: { token_count: 3, truncated: false } } });
  upstream.answer(`${PREDICT}/text-embedding-005:predict`, reply(200, { predictions: [prediction(1), prediction(2)] }));
  const embed = (model: string) => gateway.post('/v1/embeddings', { model, input: ['a', 'b'], dimensions: 2 }, { authorization: `Bearer ${key}` });
  const batch = await embed('vectors');
  t.like(await batch.json(), { data: [{ embedding: [1, 1] }, { embedding: [2, 1] }], usage: { prompt_tokens: 6 } });
  t.deepEqual(upstream.received.at(-1)?.body, { instances: [{ content: 'a' }, { content: 'b' }], parameters: { outputDimensionality: 2 } });
  upstream.answer(`${PREDICT}/gemini-embedding-001:predict`, reply(200, { predictions: [prediction(5)] }), 2);
  t.is((await embed('gemini-vectors')).status, 200);
  t.deepEqual(
    upstream.received.slice(-2).map((request) => request.body.instances),
    [[{ content: 'a' }], [{ content: 'b' }]],
  );
});

test('a vertex entry of a configuration is checked by its schema, and traces name it gcp.vertex_ai', (t) => {
  const provider = createProvider({ kind: 'vertex', id: 'v', project: 'p', location: 'global' });
  t.is(provider.telemetry?.providerName, 'gcp.vertex_ai');
  t.is(provider.telemetry?.serverAddress, 'aiplatform.googleapis.com');
  t.throws(() => createProvider({ kind: 'vertex', id: 'v', project: 'p' } as never), { message: /location/ });
});
