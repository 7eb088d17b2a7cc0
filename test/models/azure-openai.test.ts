import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import Koa from 'koa';
import test from 'ava';
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { OpenAIEmbeddings } from '@langchain/openai';
import { embed, embedMany } from 'ai';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES } from '../../lib/auth/scopes.js';
import { priceCatalog } from '../../lib/cost/price-table.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { modelsRouter } from '../../lib/models/models-router.js';
import { traceRequests } from '../../lib/tracing/trace-requests.js';
import { underPath } from '../../lib/under-path.js';
import { listen } from '../helpers/http.js';
import type { CatalogModel } from '../../lib/models/catalog.js';
import { azureOpenAIProvider, type AzureTokenCredential } from '../../lib/models/providers/azure-openai/index.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { createProvider, providerRegistry } from '../../lib/models/providers/registry.js';
import { configuredProviders, parseGatewayConfig } from '../../reference-server/config.js';
import { MemoryCooldownStore } from '../../lib/stores/memory/cooldown-store.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { providerContract } from '../../lib/testing/index.js';
import type { UsageRecord } from '../../lib/usage/usage-store.js';
import {
  AZURE_API_KEY,
  AZURE_API_VERSION,
  AZURE_TOKEN,
  FILTERED_OUTPUT,
  FILTERED_PROMPT,
  REASONING_SEALED,
  azureOpenAIUpstream,
  azureVector,
  type AzureRequest,
} from '../helpers/azure-openai-upstream.js';
import { bedrockMock, MOCK_CREDENTIALS, MOCK_REGION } from '../helpers/bedrock-mock.js';
import { modelsApp } from '../helpers/models-app.js';
import { reply, scriptedUpstream } from '../helpers/models-upstream.js';
import { checkedFetch } from '../helpers/openapi.js';
import { parseMetrics, value } from '../helpers/prometheus.js';
import { referenceApp, type ReferenceApp } from '../helpers/reference-app.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';
import { makePdf } from '../helpers/models-pdf.js';
import { until } from '../helpers/poll.js';

// The azure-openai kind against a mock of Azure OpenAI's REST API (test/helpers/azure-openai-upstream.ts),
// through the SDKs of every client format, on the dated API (deployment paths, api-version) and the v1 API;
// at the end, the kind in the reference server on both deployments, beside the embeddings of every kind.

const azure = await azureOpenAIUpstream();

// Mocks of the other kinds' embeddings APIs, for the reference server's tests at the end of the file.
const google = await scriptedUpstream();
const bedrock = await bedrockMock();
const GEMINI_KEY = 'gemini-provider-key-9d4c';
const VERTEX_TOKEN = 'ya29.vertex-access-token';
const VERTEX_MODELS = '/v1/projects/my-project/locations/us-central1/publishers/google/models';
// Bedrock reads the variables its *Env options name from the process's environment.
process.env.KMG_TEST_BEDROCK_KEY_ID = MOCK_CREDENTIALS.accessKeyId;
process.env.KMG_TEST_BEDROCK_SECRET = MOCK_CREDENTIALS.secretAccessKey;
// Vertex AI's tokens come from google-auth-library, given a workload identity key file: it trades
// the subject token for an access token at the key file's token_url, the mock's.
const keyDir = await mkdtemp(join(tmpdir(), 'kmg-vertex-'));
const SUBJECT_TOKEN = 'workload-subject-token';
await writeFile(join(keyDir, 'subject-token'), SUBJECT_TOKEN);
await writeFile(
  join(keyDir, 'external-account.json'),
  JSON.stringify({
    type: 'external_account',
    audience: '//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/test',
    subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
    token_url: `${google.url}/v1/token`,
    credential_source: { file: join(keyDir, 'subject-token') },
  }),
);

/** A credential as @azure/identity's are: counts its calls; answers AZURE_TOKEN for an hour. */
const credential = {
  calls: 0,
  async getToken() {
    credential.calls++;
    return { token: AZURE_TOKEN, expiresOnTimestamp: Date.now() + 3_600_000 };
  },
};

const { models: CATALOG } = await priceCatalog<CatalogModel>([
  // The dated API with an API key; a deployment named as its model, priced by the maintained table.
  { id: 'azure-chat', provider: 'azure', upstreamModel: 'gpt-4o-mini' },
  // The v1 API with an Entra ID token, priced by the catalog.
  { id: 'azure-v1', provider: 'azure-v1', upstreamModel: 'gpt-4o-mini', price: { input: 0.15, output: 0.6 } },
  { id: 'azure-embed', provider: 'azure', upstreamModel: 'text-embedding-3-small', type: 'embeddings' },
  { id: 'azure-v1-embed', provider: 'azure-v1', upstreamModel: 'text-embedding-3-small', type: 'embeddings' },
  // Two deployments of one model: east is tried first (random 0).
  {
    id: 'azure-routed',
    deployments: [
      { provider: 'azure-east', upstreamModel: 'gpt-4o-east' },
      { provider: 'azure', upstreamModel: 'gpt-4o-mini' },
    ],
  },
]);
const records: UsageRecord[] = [];
const gateway = await modelsApp({
  catalog: CATALOG,
  providers: [
    azureOpenAIProvider({ id: 'azure', baseURL: azure.url, apiVersion: AZURE_API_VERSION, apiKey: AZURE_API_KEY }),
    azureOpenAIProvider({ id: 'azure-v1', baseURL: azure.url, tokenCredential: credential }),
    azureOpenAIProvider({ id: 'azure-east', baseURL: azure.url, apiVersion: AZURE_API_VERSION, apiKey: AZURE_API_KEY }),
  ],
  usageRecorder: { record: (record) => void records.push(record) },
  routing: { maxAttempts: 2, random: () => 0, sleep: async () => undefined, cooldown: { failures: 1, seconds: 60, store: new MemoryCooldownStore() } },
});
test.after.always(() => Promise.all([gateway.close(), azure.close()]));

const key = await gateway.keyFor();
const openai = new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v1`, maxRetries: 0 });
const anthropic = new Anthropic({ apiKey: key, baseURL: gateway.url, maxRetries: 0 });

/** The requests the mock received while `run` ran. */
async function receivedDuring(run: () => Promise<unknown>): Promise<AzureRequest[]> {
  const before = azure.received.length;
  await run();
  return azure.received.slice(before);
}

const weatherTool = {
  type: 'function' as const,
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};
const RESULTS = ['sunny', 'rain'];

for (const model of ['azure-chat', 'azure-v1']) {
  const dated = model === 'azure-chat';
  const paths = dated
    ? {
        chat: `/openai/deployments/gpt-4o-mini/chat/completions?api-version=${AZURE_API_VERSION}`,
        responses: `/openai/responses?api-version=${AZURE_API_VERSION}`,
      }
    : { chat: '/openai/v1/chat/completions', responses: '/openai/v1/responses' };
  const credentialSent = (request: AzureRequest | undefined) =>
    dated
      ? request?.headers['api-key'] === AZURE_API_KEY && request.headers.authorization === undefined
      : request?.headers.authorization === `Bearer ${AZURE_TOKEN}`;

  test.serial(
    `${model}: Chat Completions, JSON: passed through byte for byte (Azure's own fields both ways), to ${dated ? 'the deployment' : 'the v1'} path, with the provider's credential only`,
    async (t) => {
      const body = {
        model,
        messages: [{ role: 'user', content: 'Hi' }],
        data_sources: [{ type: 'azure_search', parameters: { endpoint: 'https://search.invalid', index_name: 'docs' } }],
      };
      let answer: Record<string, unknown> = {};
      const [sent] = await receivedDuring(async () => {
        const res = await gateway.post('/v1/chat/completions', body, { authorization: `Bearer ${key}` });
        t.is(res.status, 200);
        t.is(res.headers.get('x-kmg-deployment'), dated ? 'azure' : 'azure-v1');
        answer = (await res.json()) as Record<string, unknown>;
      });
      t.is(sent?.path, paths.chat);
      t.is(sent?.raw, JSON.stringify({ ...body, model: 'gpt-4o-mini' }), 'the body as the client sent it, the upstream model named');
      t.true(credentialSent(sent));
      t.false(JSON.stringify(sent?.headers).includes(key), "the client's key never goes upstream");
      t.like(answer, {
        model,
        object: 'chat.completion',
        choices: [{ message: { content: 'Hello from Azure' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 19 },
      });
      t.truthy(answer.prompt_filter_results, "Azure's content filter results reach the client");
    },
  );

  test.serial(
    `${model}: Chat Completions through the openai SDK: a stream (Azure's choiceless first chunk included) with usage, and a tool loop with parallel calls, JSON and streamed`,
    async (t) => {
      const stream = await openai.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'Hi' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        usage = chunk.usage ?? usage;
      }
      t.is(text, 'Hello from Azure');
      t.like(usage, {
        prompt_tokens: 19,
        prompt_tokens_details: { cached_tokens: 8 },
        completion_tokens: 7,
        completion_tokens_details: { reasoning_tokens: 3 },
      });

      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris and London?' }];
      const first = await openai.chat.completions.create({ model, messages, tools: [weatherTool] });
      const calls = first.choices[0]?.message.tool_calls ?? [];
      t.is(first.choices[0]?.finish_reason, 'tool_calls');
      t.deepEqual(
        calls.map((call) => call.type === 'function' && call.function.arguments),
        ['{"city":"Paris"}', '{"city":"London"}'],
      );
      const results = calls.map((call, index): OpenAI.ChatCompletionMessageParam => ({ role: 'tool', tool_call_id: call.id, content: RESULTS[index] ?? '' }));
      const second = await openai.chat.completions.create({ model, messages: [...messages, first.choices[0]!.message, ...results], tools: [weatherTool] });
      t.is(second.choices[0]?.message.content, 'results: sunny | rain', 'the results reach the upstream in order');

      const streamed = openai.chat.completions.stream({ model, messages, tools: [weatherTool] });
      const final = await streamed.finalChatCompletion();
      t.deepEqual(
        final.choices[0]?.message.tool_calls?.map((call) => call.type === 'function' && [call.id, call.function.name, call.function.arguments]),
        [
          ['call_0', 'get_weather', '{"city":"Paris"}'],
          ['call_1', 'get_weather', '{"city":"London"}'],
        ],
      );
    },
  );

  test.serial(`${model}: Responses through the openai SDK, JSON and streamed, natively to ${paths.responses}, with a function-call loop`, async (t) => {
    const sent = await receivedDuring(async () => {
      const response = await openai.responses.create({ model, input: 'Hi' });
      t.is(response.output_text, 'Hello from Azure');
      t.is(response.model, model);
      t.like(response.usage, {
        input_tokens: 19,
        input_tokens_details: { cached_tokens: 8 },
        output_tokens: 7,
        output_tokens_details: { reasoning_tokens: 3 },
      });
      const streamed = await openai.responses.stream({ model, input: 'Hi' }).finalResponse();
      t.is(streamed.output_text, 'Hello from Azure');
      t.like(streamed.usage, { input_tokens: 19, input_tokens_details: { cached_tokens: 8 }, output_tokens: 7 });
    });
    t.deepEqual(
      sent.map((request) => [request.path, request.body.model]),
      [
        [paths.responses, 'gpt-4o-mini'],
        [paths.responses, 'gpt-4o-mini'],
      ],
    );
    t.true(sent.every(credentialSent));

    const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', strict: false, parameters: weatherTool.function.parameters }];
    const first = await openai.responses.stream({ model, input: 'Weather in Paris and London?', tools }).finalResponse();
    const calls = first.output.filter((item) => item.type === 'function_call');
    t.deepEqual(
      calls.map((call) => call.arguments),
      ['{"city":"Paris"}', '{"city":"London"}'],
    );
    const input: OpenAI.Responses.ResponseInput = [
      { role: 'user', content: 'Weather in Paris and London?' },
      ...calls,
      ...calls.map((call, index) => ({ type: 'function_call_output' as const, call_id: call.call_id, output: RESULTS[index] ?? '' })),
    ];
    const second = await openai.responses.create({ model, input, tools });
    t.is(second.output_text, 'results: sunny | rain');

    // A reasoning model's sealed reasoning, streamed, goes back on the next turn as it came.
    const asked = { reasoning: { effort: 'low' as const }, include: ['reasoning.encrypted_content' as const], store: false };
    const reasoned = await openai.responses.stream({ model, input: 'Think first.', ...asked }).finalResponse();
    const sealed = reasoned.output.find((item) => item.type === 'reasoning');
    t.is(sealed?.encrypted_content, REASONING_SEALED);
    const [next] = await receivedDuring(() =>
      openai.responses.create({
        model,
        input: [
          { role: 'user', content: 'Think first.' },
          sealed!,
          ...reasoned.output.filter((item) => item.type === 'message'),
          { role: 'user', content: 'And?' },
        ],
        ...asked,
      }),
    );
    t.deepEqual((next!.body.input as unknown[])[1], { id: 'rs_az1', type: 'reasoning', summary: [], encrypted_content: REASONING_SEALED });
  });

  test.serial(`${model}: Messages through the Anthropic SDK, translated to Chat Completions: JSON, stream and a parallel tool loop`, async (t) => {
    const sent = await receivedDuring(async () => {
      const message = await anthropic.messages.create({ model, max_tokens: 100, system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }] });
      t.like(message, { model, stop_reason: 'end_turn', usage: { input_tokens: 11, cache_read_input_tokens: 8, output_tokens: 7 } });
      t.is(message.content[0]?.type === 'text' && message.content[0].text, 'Hello from Azure');
      const streamed = await anthropic.messages.stream({ model, max_tokens: 100, messages: [{ role: 'user', content: 'Hi' }] }).finalMessage();
      t.is(streamed.content[0]?.type === 'text' && streamed.content[0].text, 'Hello from Azure');
      t.like(streamed.usage, { input_tokens: 11, cache_read_input_tokens: 8, output_tokens: 7 });
    });
    t.deepEqual(
      sent.map((request) => request.path),
      [paths.chat, paths.chat],
    );
    t.like(sent[0]?.body, { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user' }] });

    const tools: Anthropic.Tool[] = [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris and London?' }];
    const first = await anthropic.messages.stream({ model, max_tokens: 100, messages, tools }).finalMessage();
    t.is(first.stop_reason, 'tool_use');
    const uses = first.content.filter((block) => block.type === 'tool_use');
    t.deepEqual(
      uses.map((use) => use.input),
      [{ city: 'Paris' }, { city: 'London' }],
    );
    const second = await anthropic.messages.create({
      model,
      max_tokens: 100,
      tools,
      messages: [
        ...messages,
        { role: 'assistant', content: first.content },
        { role: 'user', content: uses.map((use, index) => ({ type: 'tool_result' as const, tool_use_id: use.id, content: RESULTS[index] ?? '' })) },
      ],
    });
    t.is(second.content[0]?.type === 'text' && second.content[0].text, 'results: sunny | rain');
  });

  test.serial(
    `${model}: Azure's content filter: a filtered prompt is a 400 content_filter in the client's shape (openai and Anthropic SDKs), a filtered completion a finish reason`,
    async (t) => {
      const refused = await t.throwsAsync(openai.chat.completions.create({ model, messages: [{ role: 'user', content: FILTERED_PROMPT }] }), {
        instanceOf: OpenAI.BadRequestError,
      });
      t.like(refused, { status: 400, code: 'content_filter', type: 'invalid_request_error' });
      t.regex(refused?.message ?? '', /content management policy/);
      const streamRefused = await t.throwsAsync(openai.responses.create({ model, input: FILTERED_PROMPT, stream: true }), {
        instanceOf: OpenAI.BadRequestError,
      });
      t.like(streamRefused, { status: 400, code: 'content_filter' });
      const viaMessages = await t.throwsAsync(anthropic.messages.create({ model, max_tokens: 10, messages: [{ role: 'user', content: FILTERED_PROMPT }] }), {
        instanceOf: Anthropic.BadRequestError,
      });
      t.like(viaMessages?.error, { type: 'error', error: { type: 'invalid_request_error' } });

      const filtered = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: FILTERED_OUTPUT }] });
      t.is(filtered.choices[0]?.finish_reason, 'content_filter');
      const stream = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: FILTERED_OUTPUT }], stream: true });
      const finishes: Array<string | null | undefined> = [];
      for await (const chunk of stream) finishes.push(...chunk.choices.map((choice) => choice.finish_reason));
      t.is(finishes.at(-1), 'content_filter');
      const viaMessagesFiltered = await anthropic.messages.create({ model, max_tokens: 10, messages: [{ role: 'user', content: FILTERED_OUTPUT }] });
      t.is(viaMessagesFiltered.stop_reason, 'refusal');
      const streamedFiltered = await anthropic.messages
        .stream({ model, max_tokens: 10, messages: [{ role: 'user', content: FILTERED_OUTPUT }] })
        .finalMessage();
      t.is(streamedFiltered.stop_reason, 'refusal');
    },
  );

  test.serial(`${model}: embeddings through the openai SDK, base64 (its default) and floats, to ${dated ? 'the deployment' : 'the v1'} path`, async (t) => {
    const embeddingModel = dated ? 'azure-embed' : 'azure-v1-embed';
    const sent = await receivedDuring(async () => {
      const base64 = await openai.embeddings.create({ model: embeddingModel, input: ['abc', 'hello'] });
      const floats = await openai.embeddings.create({ model: embeddingModel, input: ['abc', 'hello'], encoding_format: 'float' });
      for (const answer of [base64, floats]) {
        t.is(answer.model, embeddingModel);
        t.deepEqual(
          answer.data.map((item) => Array.from(item.embedding)),
          [
            [3, 97, 0.5],
            [5, 104, 0.5],
          ],
        );
        t.like(answer.usage, { prompt_tokens: 8, total_tokens: 8 });
      }
    });
    const path = dated ? `/openai/deployments/text-embedding-3-small/embeddings?api-version=${AZURE_API_VERSION}` : '/openai/v1/embeddings';
    t.deepEqual(
      sent.map((request) => [request.path, request.body.model, request.body.encoding_format]),
      [
        [path, 'text-embedding-3-small', 'base64'],
        [path, 'text-embedding-3-small', 'float'],
      ],
    );
    t.true(sent.every(credentialSent));
  });
}

test.serial('a stored PDF attached by its file id reaches Azure inline, as Chat Completions and Responses carry one, from each client format', async (t) => {
  const pdf = makePdf(1);
  const fileId = await gateway.storePdf(pdf, { filename: 'memo.pdf' });
  const inline = pdf.toString('base64');
  const sent = await receivedDuring(async () => {
    await openai.chat.completions.create({
      model: 'azure-chat',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Summarise.' },
            { type: 'file', file: { file_id: fileId } },
          ],
        },
      ],
    });
    await openai.responses.create({
      model: 'azure-v1',
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'Summarise.' },
            { type: 'input_file', file_id: fileId },
          ],
        },
      ],
    });
    await anthropic.messages.create({
      model: 'azure-chat',
      max_tokens: 10,
      messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: fileId } } as never, { type: 'text', text: 'Summarise.' }] }],
    });
  });
  t.is(sent.length, 3);
  for (const request of sent) {
    t.true(request.raw.includes(inline), `${request.path}: the PDF inline`);
    t.false(request.raw.includes(fileId), `${request.path}: not the gateway's file id`);
  }
});

test.serial(
  'usage and cost: every call recorded with its tokens, its cache reads at their price, priced by the maintained table or the catalog, streamed or not, in each format',
  async (t) => {
    const before = records.length;
    const ask = [{ role: 'user' as const, content: 'Hi' }];
    for (const model of ['azure-chat', 'azure-v1']) {
      await openai.chat.completions.create({ model, messages: ask });
      for await (const chunk of await openai.chat.completions.create({ model, messages: ask, stream: true })) void chunk;
      await openai.responses.stream({ model, input: 'Hi' }).finalResponse();
      await anthropic.messages.create({ model, max_tokens: 10, messages: ask });
    }
    const mine = await until(
      async () => records.slice(before),
      (found) => found.length === 8,
    );
    const price = (id: string) => CATALOG.find((model) => model.id === id)?.price;
    t.true((price('azure-chat')?.input ?? 0) > 0, 'the table prices the deployment named as its model');
    for (const record of mine) {
      t.like(record, { inputTokens: 19, outputTokens: 7, upstreamModel: 'gpt-4o-mini' });
      const { input = 0, output = 0, cacheRead = input } = price(record.model ?? '') ?? {};
      t.is(record.costPicoUsd, Math.round((11 * input + 8 * cacheRead + 7 * output) * 1e6), `${record.model} on ${record.endpoint}: its cost`);
    }
    t.deepEqual(
      mine.map((record) => record.provider),
      ['azure', 'azure', 'azure', 'azure', 'azure-v1', 'azure-v1', 'azure-v1', 'azure-v1'],
    );
  },
);

test.serial(
  "a 429 (Azure's retry-after, retry-after-ms, x-ratelimit-*) is retried on the model's other deployment, which then cools down; with none left it reaches the client as a retryable 429",
  async (t) => {
    azure.throttle(1);
    const res = await gateway.post(
      '/v1/chat/completions',
      { model: 'azure-routed', messages: [{ role: 'user', content: 'Hi' }] },
      { authorization: `Bearer ${key}` },
    );
    t.is(res.status, 200);
    t.is(res.headers.get('x-kmg-attempts'), '2');
    t.is(res.headers.get('x-kmg-deployment'), 'azure');
    const sent = await receivedDuring(async () => {
      const next = await gateway.post(
        '/v1/chat/completions',
        { model: 'azure-routed', messages: [{ role: 'user', content: 'Hi' }] },
        { authorization: `Bearer ${key}` },
      );
      t.is(next.headers.get('x-kmg-attempts'), '1', 'east cools down: not tried');
    });
    t.deepEqual(
      sent.map((request) => request.path.split('/')[3]),
      ['gpt-4o-mini'],
    );

    azure.throttle(2);
    const limited = await t.throwsAsync(openai.chat.completions.create({ model: 'azure-chat', messages: [{ role: 'user', content: 'Hi' }] }), {
      instanceOf: OpenAI.RateLimitError,
    });
    t.is(limited?.headers.get('retry-after'), '2');
    t.like(limited, { status: 429, type: 'rate_limit_error' });
    azure.throttle(2);
    const viaMessages = await t.throwsAsync(anthropic.messages.create({ model: 'azure-v1', max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }] }), {
      instanceOf: Anthropic.RateLimitError,
    });
    t.is(viaMessages?.headers.get('retry-after'), '2');
  },
);

test.serial(
  'Entra ID: the token is asked of the credential once and kept; an expired one is renewed; a credential that fails or stalls is a 502 or 504, never a hang',
  async (t) => {
    const v1 = (provider: ReturnType<typeof azureOpenAIProvider>, signal = AbortSignal.timeout(5_000)) =>
      provider.chatCompletions!({ body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }, headers: {}, signal });
    const asked: number[] = [];
    let serial = 0;
    const expiring: AzureTokenCredential = {
      getToken: async () => {
        asked.push(++serial);
        azure.tokens.add(`token-${serial}`);
        // The first token has expired already; the second lasts an hour.
        return { token: `token-${serial}`, expiresOnTimestamp: serial === 1 ? Date.now() - 1 : Date.now() + 3_600_000 };
      },
    };
    const provider = azureOpenAIProvider({ id: 'entra', baseURL: azure.url, tokenCredential: expiring });
    t.teardown(() => provider.close?.());
    const sent = await receivedDuring(async () => {
      for (let call = 0; call < 3; call++) {
        const answer = (await v1(provider)) as { statusCode: number; body: AsyncIterable<unknown> };
        t.is(answer.statusCode, 200);
        for await (const chunk of answer.body) void chunk;
      }
    });
    t.deepEqual(
      sent.map((request) => request.headers.authorization),
      ['Bearer token-1', 'Bearer token-2', 'Bearer token-2'],
    );
    t.deepEqual(asked, [1, 2]);
    const callsBefore = credential.calls;
    await openai.chat.completions.create({ model: 'azure-v1', messages: [{ role: 'user', content: 'Hi' }] });
    t.true(callsBefore >= 1 && credential.calls === callsBefore, 'a token that lasts is not asked again');

    const failing = azureOpenAIProvider({
      id: 'failing',
      baseURL: azure.url,
      tokenCredential: { getToken: () => Promise.reject(new Error('no identity here')) },
    });
    const stalling = azureOpenAIProvider({ id: 'stalling', baseURL: azure.url, tokenCredential: { getToken: () => new Promise(() => undefined) } });
    const app = await modelsApp({
      catalog: [
        { id: 'failing', provider: 'failing', upstreamModel: 'gpt-4o-mini' },
        { id: 'stalling', provider: 'stalling', upstreamModel: 'gpt-4o-mini' },
      ],
      providers: [failing, stalling],
      timeoutMs: 300,
    });
    t.teardown(app.close);
    const appKey = await app.keyFor();
    const nothingSent = await receivedDuring(async () => {
      const failed = await app.post(
        '/v1/chat/completions',
        { model: 'failing', messages: [{ role: 'user', content: 'Hi' }] },
        { authorization: `Bearer ${appKey}` },
      );
      t.is(failed.status, 502);
      t.false((await failed.text()).includes('no identity here'), "the credential's error stays in the log");
      const stalled = await app.post(
        '/v1/chat/completions',
        { model: 'stalling', messages: [{ role: 'user', content: 'Hi' }] },
        { authorization: `Bearer ${appKey}` },
      );
      t.is(stalled.status, 504);
    });
    t.deepEqual(nothingSent, []);
  },
);

test.serial(
  "entraId names @azure/identity's credential: made and asked at the first call (EnvironmentCredential without its variables fails: a rejected call, nothing sent)",
  async (t) => {
    const provider = azureOpenAIProvider({ id: 'env', baseURL: azure.url, entraId: { credential: 'EnvironmentCredential' } });
    t.teardown(() => provider.close?.());
    const sent = await receivedDuring(() =>
      t.throwsAsync(provider.chatCompletions!({ body: { model: 'gpt-4o-mini', messages: [] }, headers: {}, signal: AbortSignal.timeout(5_000) })),
    );
    t.deepEqual(sent, []);
  },
);

test('without @azure/identity installed, an entraId provider is refused at start-up naming the package; an api-key one is made, and loading the kind needs no such package', async (t) => {
  const script = `
    const { azureOpenAIProvider } = await import(${JSON.stringify(new URL('../../lib/models/providers/azure-openai/index.js', import.meta.url).href)});
    azureOpenAIProvider({ id: 'k', baseURL: 'https://r.openai.azure.com', apiKey: 'k' });
    try {
      azureOpenAIProvider({ id: 'e', baseURL: 'https://r.openai.azure.com', entraId: {} });
    } catch (err) {
      console.log(err.message);
    }`;
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', new URL('../helpers/hide-packages.js', import.meta.url).href, '--input-type=module', '-e', script],
    { env: { ...process.env, KMG_TEST_HIDDEN_PACKAGES: '@azure/identity' } },
  );
  t.is(stdout.trim(), 'koa-model-gateway: azureOpenAIProvider(): a Microsoft Entra ID token needs the package @azure/identity (npm install @azure/identity)');
});

test.serial('the kind from a config file: apiKeyEnv or entraId, its options checked at start-up, telemetry naming azure.ai.openai', async (t) => {
  const file = {
    providers: [
      { id: 'azure', kind: 'azure-openai', baseURL: azure.url, apiVersion: AZURE_API_VERSION, apiKeyEnv: 'AZURE_OPENAI_API_KEY' },
      { id: 'azure-entra', kind: 'azure-openai', baseURL: azure.url, entraId: { credential: 'WorkloadIdentityCredential', clientId: 'client-1' } },
    ],
    models: [{ id: 'azure-chat', provider: 'azure', upstreamModel: 'gpt-4o-mini' }],
  };
  const providers = configuredProviders({
    gateway: parseGatewayConfig(file, 'test'),
    env: { AZURE_OPENAI_API_KEY: AZURE_API_KEY },
    providerKinds: providerRegistry,
  });
  t.teardown(() => Promise.all(providers.map((provider) => provider.close?.())));
  const [sent] = await receivedDuring(async () => {
    const answer = await providers[0]!.chatCompletions!({ body: { model: 'gpt-4o-mini', messages: [] }, headers: {}, signal: AbortSignal.timeout(5_000) });
    t.is((answer as { statusCode: number }).statusCode, 200);
    for await (const chunk of (answer as { body: AsyncIterable<unknown> }).body) void chunk;
  });
  t.is(sent?.headers['api-key'], AZURE_API_KEY, 'the key from the environment variable apiKeyEnv names');
  const chatOnly = createProvider({ kind: 'azure-openai', id: 'a', baseURL: azure.url, apiKey: 'k', endpoints: ['chat.completions', 'embeddings'] });
  t.deepEqual(
    [typeof chatOnly.chatCompletions, typeof chatOnly.responses, typeof chatOnly.embeddings],
    ['function', 'undefined', 'function'],
    'endpoints as the openai kind',
  );
  t.throws(() => parseGatewayConfig({ providers: [{ ...file.providers[0], apiKey: 'k' }] }, 'test'), {
    message: /providers\[0\]\.apiKey must not be in the file/,
  });

  const made = createProvider({ kind: 'azure-openai', id: 'azure', baseURL: 'https://my-resource.openai.azure.com', apiKey: 'k' });
  t.deepEqual(made.telemetry, { providerName: 'azure.ai.openai', serverAddress: 'my-resource.openai.azure.com', serverPort: 443 });
  t.truthy(
    createProvider({
      kind: 'azure-openai',
      id: 'azure',
      baseURL: 'https://my-resource.openai.azure.com',
      entraId: { credential: 'ManagedIdentityCredential', clientId: 'c' },
    }),
  );
  const refused: Array<[Record<string, unknown>, RegExp]> = [
    [{ id: 'a', apiKey: 'k' }, /baseURL/],
    [{ id: 'a', baseURL: 'https://r.openai.azure.com' }, /needs exactly one credential: apiKey \(a config file's apiKeyEnv\), entraId or tokenCredential/],
    [
      { id: 'a', baseURL: 'https://r.openai.azure.com', apiKey: 'k', entraId: {} },
      /needs exactly one credential: apiKey \(a config file's apiKeyEnv\), entraId or tokenCredential/,
    ],
    [{ id: 'a', baseURL: 'https://r.openai.azure.com?x=1', apiKey: 'k' }, /baseURL must have no query/],
    [{ id: 'a', baseURL: 'https://r.openai.azure.com', apiKey: 'k', apiVersion: '2024-10-21&x=1' }, /apiVersion must be an API version/],
    [{ id: 'a', baseURL: 'https://r.openai.azure.com', entraId: { credential: 'AzureCliCredential', clientId: 'c' } }, /clientId is for/],
    [{ id: 'a', baseURL: 'https://r.openai.azure.com', entraId: { credential: 'Password' } }, /entraId.credential must be one of/],
    [{ id: 'a', baseURL: 'https://r.openai.azure.com', tokenCredential: 'secret' }, /tokenCredential must be a credential/],
  ];
  for (const [options, message] of refused) {
    t.throws(() => azureOpenAIProvider(options as never), { instanceOf: TypeError, message }, JSON.stringify(options));
  }
});

const event = (data: unknown, name?: string) => `${name === undefined ? '' : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`;
const chunk = (delta: unknown, finish: string | null) =>
  event({
    id: 'chatcmpl-1',
    created: 1,
    model: 'm',
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finish, content_filter_results: {} }],
  });
const chatScript = (path: string) => ({
  path,
  answer: {
    id: 'chatcmpl-1',
    created: 1,
    model: 'm',
    object: 'chat.completion',
    prompt_filter_results: [],
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop', content_filter_results: {} }],
    usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 },
  },
  events: [
    event({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: [] }),
    chunk({ role: 'assistant', content: 'Hi' }, 'stop'),
    event({
      id: 'chatcmpl-1',
      created: 1,
      model: 'm',
      object: 'chat.completion.chunk',
      choices: [],
      usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 },
    }),
    'data: [DONE]\n\n',
  ],
  usage: { inputTokens: 9, outputTokens: 3 },
});
const response = (status: string, usage: unknown) => ({ id: 'resp_1', object: 'response', created_at: 1, status, model: 'm', output: [], usage });
const responsesScript = (path: string) => ({
  path,
  answer: response('completed', { input_tokens: 5, output_tokens: 2, total_tokens: 7 }),
  events: [
    event({ type: 'response.created', sequence_number: 0, response: response('in_progress', null) }, 'response.created'),
    event(
      { type: 'response.completed', sequence_number: 1, response: response('completed', { input_tokens: 5, output_tokens: 2, total_tokens: 7 }) },
      'response.completed',
    ),
  ],
  usage: { inputTokens: 5, outputTokens: 2 },
});
const UPSTREAM_MODEL = 'upstream-model-4e1b';

providerContract(test, {
  name: 'azureOpenAIProvider (api-version, api-key)',
  create: (baseURL) => azureOpenAIProvider({ id: 'azure', baseURL, apiVersion: AZURE_API_VERSION, apiKey: AZURE_API_KEY }),
  upstream: {
    chatCompletions: chatScript(`/openai/deployments/${UPSTREAM_MODEL}/chat/completions?api-version=${AZURE_API_VERSION}`),
    responses: responsesScript(`/openai/responses?api-version=${AZURE_API_VERSION}`),
  },
});

providerContract(test, {
  name: 'azureOpenAIProvider (v1, Entra ID)',
  create: (baseURL) => azureOpenAIProvider({ id: 'azure', baseURL, tokenCredential: credential }),
  upstream: { chatCompletions: chatScript('/openai/v1/chat/completions'), responses: responsesScript('/openai/v1/responses') },
});

test.serial('traces name the provider azure.ai.openai and its host, the deployment asked for, the usage and the finish reason', async (t) => {
  const exporter = new InMemorySpanExporter();
  const tracer = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  tracer.register();
  t.teardown(() => tracer.shutdown());
  const keys = new MemoryKeyStore();
  const provider = azureOpenAIProvider({ id: 'azure', baseURL: azure.url, apiVersion: AZURE_API_VERSION, apiKey: AZURE_API_KEY });
  const router = modelsRouter({
    catalog: [{ id: 'azure-chat', provider: 'azure', upstreamModel: 'gpt-4o-mini' }],
    providers: [provider],
    routing: { maxAttempts: 1 },
  });
  const app = new Koa();
  app.use(traceRequests());
  app.use(gatewayErrors());
  app.use(underPath('/v1', apiKey({ store: keys })));
  app.use(router.routes());
  const server = await listen(app);
  t.teardown(async () => {
    await server.close();
    await provider.close?.();
  });
  const tracedKey = (await createApiKey(keys, { prefix: 'kmg', account: 'acme', scopes: [...SCOPES], models: null })).key;
  const client = new OpenAI({ apiKey: tracedKey, baseURL: `${server.url}/v1`, maxRetries: 0 });
  await client.chat.completions.create({ model: 'azure-chat', messages: [{ role: 'user', content: 'Hi' }] });
  const spans = await until(
    async () => exporter.getFinishedSpans().filter((span) => span.kind === SpanKind.CLIENT),
    (found) => found.length === 1,
  );
  t.like(spans[0]?.attributes, {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'azure.ai.openai',
    'gen_ai.request.model': 'gpt-4o-mini',
    'server.address': '127.0.0.1',
    'server.port': Number(new URL(azure.url).port),
    'kmg.provider.id': 'azure',
    'gen_ai.usage.input_tokens': 19,
    'gen_ai.usage.output_tokens': 7,
  });
  t.deepEqual(spans[0]?.attributes['gen_ai.response.finish_reasons'], ['stop']);
});

// The reference server from its config file, on both deployments: the embedded one (SQLite,
// limits in memory) and PostgreSQL + Redis, one server each, shared by the two tests on it: the
// azure-openai kind to every client format, and the embeddings of every kind that has them
// (echo, azure-openai, gemini, vertex, bedrock), each against a mock of its own API, through the
// three clients.

/** The vector a mock gives a text: its provider's tag, a hash of the text and its length / 4, exact in float32, so that floats and base64 agree to the bit. */
function mockVector(tag: number, text: string): number[] {
  let hash = 0;
  for (const byte of Buffer.from(text)) hash = (hash * 31 + byte) % 65_521;
  return [tag, hash, text.length / 4];
}
/** The tokens the mocks count in a text: its words. */
const words = (text: string) => text.split(' ').length;
const TAGS = { gemini: 1, vertex: 2, titan: 3, cohere: 4 };

// Gemini's batchEmbedContents, Vertex AI's predict and Google's STS token exchange, as their references show them.
const GEMINI_EMBED = '/v1beta/models/gemini-embedding-001:batchEmbedContents';
google.answerEvery(GEMINI_EMBED, (res, request) => {
  if (request.headers['x-goog-api-key'] !== GEMINI_KEY) {
    return reply(400, { error: { code: 400, message: 'API key not valid. Please pass a valid API key.', status: 'INVALID_ARGUMENT' } })(res, request);
  }
  const requests = request.body.requests as Array<{ content: { parts: Array<{ text: string }> } }>;
  reply(200, { embeddings: requests.map(({ content }) => ({ values: mockVector(TAGS.gemini, content.parts[0]?.text ?? '') })) })(res, request);
});
const VERTEX_PREDICT = `${VERTEX_MODELS}/text-embedding-005:predict`;
google.answerEvery(VERTEX_PREDICT, (res, request) => {
  if (request.headers.authorization !== `Bearer ${VERTEX_TOKEN}`) {
    return reply(401, { error: { code: 401, message: 'Request had invalid authentication credentials.', status: 'UNAUTHENTICATED' } })(res, request);
  }
  const instances = request.body.instances as Array<{ content: string }>;
  const predictions = instances.map(({ content }) => ({
    embeddings: { values: mockVector(TAGS.vertex, content), statistics: { truncated: false, token_count: words(content) } },
  }));
  reply(200, { predictions, metadata: { billableCharacterCount: 0 } })(res, request);
});
google.answerEvery('/v1/token', (res, request) => {
  if (request.body.subject_token !== SUBJECT_TOKEN) return reply(400, { error: 'invalid_grant' })(res, request);
  const token = { access_token: VERTEX_TOKEN, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token', token_type: 'Bearer', expires_in: 3600 };
  reply(200, token)(res, request);
});
// Titan's and Cohere's InvokeModel answers: Cohere's tokens in Bedrock's header.
bedrock.script(({ model, body }) => {
  if (model.startsWith('cohere.')) {
    const [text] = body.texts as string[];
    return {
      json: { id: 'emb-1', response_type: 'embeddings_by_type', embeddings: { float: [mockVector(TAGS.cohere, text ?? '')] }, texts: body.texts },
      headers: { 'x-amzn-bedrock-input-token-count': String(words(text ?? '')) },
    };
  }
  return { json: { embedding: mockVector(TAGS.titan, body.inputText), inputTextTokenCount: words(body.inputText) } };
});

const TEXTS = ['the quick fox', 'a lazy dog', 'the quick fox jumps'];
const echo = echoProvider({ id: 'echo' });
/** Each embeddings model of the server: the vectors its provider gives, the tokens it counts in TEXTS, its price, and how many inputs each call its mock received held. */
const EMBEDDERS: Array<{
  model: string;
  provider: string;
  vectors: (texts: string[]) => Promise<number[][]>;
  tokens: number;
  price: number;
  perCall?: { limit: number; sent: () => number[] };
}> = [
  {
    model: 'echo-embed',
    provider: 'echo',
    vectors: async (texts) =>
      (await echo.embed!({ model: 'echo', inputs: texts, signal: AbortSignal.timeout(5_000) })).vectors.map((vector) => Array.from(vector)),
    tokens: 10,
    price: 0.01,
  },
  { model: 'embed', provider: 'azure', vectors: async (texts) => texts.map(azureVector), tokens: 12, price: 0.02 },
  {
    model: 'gemini-embed',
    provider: 'gemini',
    vectors: async (texts) => texts.map((text) => mockVector(TAGS.gemini, text)),
    // Gemini counts no tokens: 42 characters at four a token.
    tokens: 11,
    price: 0.15,
    perCall: {
      limit: 100,
      sent: () => google.received.filter(({ path }) => path === GEMINI_EMBED).map(({ body }) => (body.requests as unknown[]).length),
    },
  },
  {
    model: 'vertex-embed',
    provider: 'vertex',
    vectors: async (texts) => texts.map((text) => mockVector(TAGS.vertex, text)),
    tokens: 10,
    price: 0.025,
    perCall: { limit: 250, sent: () => google.received.filter(({ path }) => path === VERTEX_PREDICT).map(({ body }) => (body.instances as unknown[]).length) },
  },
  {
    model: 'titan-embed',
    provider: 'bedrock',
    vectors: async (texts) => texts.map((text) => mockVector(TAGS.titan, text)),
    tokens: 10,
    price: 0.02,
    perCall: { limit: 1, sent: () => bedrock.calls.filter((call) => call.model.startsWith('amazon.')).map(() => 1) },
  },
  {
    model: 'cohere-embed',
    provider: 'bedrock',
    vectors: async (texts) => texts.map((text) => mockVector(TAGS.cohere, text)),
    tokens: 10,
    price: 0.1,
    perCall: { limit: 1, sent: () => bedrock.calls.filter((call) => call.model.startsWith('cohere.')).map((call) => (call.body.texts as unknown[]).length) },
  },
];
const UPSTREAM_MODELS: Record<string, string> = {
  embed: 'text-embedding-3-small',
  'gemini-embed': 'gemini-embedding-001',
  'vertex-embed': 'text-embedding-005',
  'titan-embed': 'amazon.titan-embed-text-v2:0',
  'cohere-embed': 'cohere.embed-multilingual-v3',
};

const SERVER_CONFIG = {
  providers: [
    { id: 'azure', kind: 'azure-openai', baseURL: azure.url, apiVersion: AZURE_API_VERSION, apiKeyEnv: 'AZURE_OPENAI_API_KEY' },
    { id: 'gemini', kind: 'gemini', baseURL: google.url, apiKeyEnv: 'GEMINI_API_KEY' },
    { id: 'vertex', kind: 'vertex', project: 'my-project', location: 'us-central1', baseURL: google.url, keyFile: join(keyDir, 'external-account.json') },
    {
      id: 'bedrock',
      kind: 'bedrock',
      region: MOCK_REGION,
      baseURL: bedrock.url,
      accessKeyIdEnv: 'KMG_TEST_BEDROCK_KEY_ID',
      secretAccessKeyEnv: 'KMG_TEST_BEDROCK_SECRET',
    },
  ],
  models: [
    { id: 'gpt-4o-mini', provider: 'azure', price: { input: 0.15, output: 0.6, cacheRead: 0.075 } },
    ...EMBEDDERS.map(({ model, provider, price }) => ({
      id: model,
      provider,
      ...(UPSTREAM_MODELS[model] !== undefined && { upstreamModel: UPSTREAM_MODELS[model] }),
      type: 'embeddings',
      price: { input: price, output: 0 },
    })),
  ],
  routing: { maxAttempts: 1 },
};

const deployments = [
  ['embedded', test, async () => ({ env: {}, drop: async () => undefined })],
  [
    'postgres+redis',
    withRedis(withPostgres(test)),
    async () => {
      const database = await throwawayPostgres();
      return { env: { DATABASE_URL: database.url, REDIS_URL }, drop: database.drop };
    },
  ],
] as const;

/** The server of each deployment, started by the first test on it. */
const servers = new Map<string, Promise<{ server: ReferenceApp; drop: () => Promise<void> }>>();
function deploymentServer(name: string, database: () => Promise<{ env: Record<string, string>; drop: () => Promise<void> }>) {
  let started = servers.get(name);
  if (started === undefined) {
    started = (async () => {
      const { env, drop } = await database();
      const secrets = { AZURE_OPENAI_API_KEY: AZURE_API_KEY, GEMINI_API_KEY: GEMINI_KEY };
      // METRICS_PORT: the metrics are kept; the reference app starts no listener for them.
      const server = await referenceApp(SERVER_CONFIG, { ...env, ...secrets, METRICS_PORT: '0' }).catch(async (err: unknown) => {
        await drop();
        throw err;
      });
      return { server, drop };
    })();
    servers.set(name, started);
  }
  return started;
}
test.after.always(async () => {
  await Promise.all(
    [...servers.values()].map(async (started) => {
      const { server, drop } = await started;
      await server.close();
      await drop();
    }),
  );
  await Promise.all([google.close(), bedrock.close(), rm(keyDir, { recursive: true, force: true })]);
});

/** The float32 values of OpenAI's base64 encoding of a vector: little-endian. */
const decoded = (base64: string) => {
  const bytes = Buffer.from(base64, 'base64');
  return Array.from({ length: bytes.length / 4 }, (_, at) => bytes.readFloatLE(at * 4));
};

for (const [name, gated, database] of deployments) {
  gated.serial(
    `the reference server (${name}) serves an azure-openai provider of its config file to every client format, a 429 and usage with cost`,
    async (t) => {
      const { server } = await deploymentServer(name, database);
      const account = `azure-${name}`;
      const serverKey = await server.keyFor(undefined, { account });
      const client = new OpenAI({ apiKey: serverKey, baseURL: `${server.url}/v1`, maxRetries: 0 });
      const claude = new Anthropic({ apiKey: serverKey, baseURL: server.url, maxRetries: 0 });
      const ask = [{ role: 'user' as const, content: 'Hi' }];

      const sent = await receivedDuring(async () => {
        t.is((await client.chat.completions.create({ model: 'gpt-4o-mini', messages: ask })).choices[0]?.message.content, 'Hello from Azure');
        let text = '';
        for await (const chunk of await client.chat.completions.create({ model: 'gpt-4o-mini', messages: ask, stream: true }))
          text += chunk.choices[0]?.delta.content ?? '';
        t.is(text, 'Hello from Azure');
        t.is((await client.responses.create({ model: 'gpt-4o-mini', input: 'Hi' })).output_text, 'Hello from Azure');
        const message = await claude.messages.create({ model: 'gpt-4o-mini', max_tokens: 10, messages: ask });
        t.is(message.content[0]?.type === 'text' && message.content[0].text, 'Hello from Azure');
      });
      t.is(sent.length, 4);
      t.true(sent.every((request) => request.headers['api-key'] === AZURE_API_KEY && !JSON.stringify(request.headers).includes(serverKey)));

      azure.throttle(1);
      const limited = await t.throwsAsync(client.chat.completions.create({ model: 'gpt-4o-mini', messages: ask }), { instanceOf: OpenAI.RateLimitError });
      t.is(limited?.headers.get('retry-after'), '2');

      const records = await until(
        () => server.deployment.usageStore.list({ account }),
        (found) => found.length === 5,
      );
      const byEndpoint = Object.fromEntries(records.filter((record) => record.status === 200).map((record) => [`${record.endpoint} ${record.stream}`, record]));
      t.is(Object.keys(byEndpoint).length, 4, 'one record per call');
      for (const record of Object.values(byEndpoint)) {
        t.like(record, { provider: 'azure', upstreamModel: 'gpt-4o-mini', inputTokens: 19, outputTokens: 7 });
        t.is(record.costPicoUsd, Math.round((11 * 0.15 + 8 * 0.075 + 7 * 0.6) * 1e6), `${record.endpoint}: its cost`);
      }
      t.like(
        records.find((record) => record.status === 429),
        { provider: 'azure', costPicoUsd: 0 },
      );
    },
  );

  gated.serial(
    `the reference server (${name}): the openai SDK (base64, its default, and floats), the AI SDK and LangChain get the vectors of echo and of each provider's embeddings API; a batch over a provider's per-call limit is split and joined in order; usage, cost and metrics per provider`,
    async (t) => {
      const { server } = await deploymentServer(name, database);
      // Every answer a client gets agrees with docs/openapi.json.
      const problems: string[] = [];
      const fetch = checkedFetch(problems);
      const key = await server.keyFor(undefined, { account: `clients-${name}` });
      const openai = new OpenAI({ apiKey: key, baseURL: `${server.url}/v1`, maxRetries: 0, fetch });
      const aiSdk = createOpenAI({ apiKey: key, baseURL: `${server.url}/v1`, fetch });
      const langchain = (model: string) => new OpenAIEmbeddings({ model, apiKey: key, maxRetries: 0, configuration: { baseURL: `${server.url}/v1`, fetch } });
      // One call a model on an account of its own, under a budget: the records, cost and metrics to check.
      const meteredAccount = `metered-${name}`;
      const metered = await server.keyFor(undefined, { account: meteredAccount, limits: { costPerDay: 1 } });

      // The models side by side: each one's calls in order.
      await Promise.all(
        EMBEDDERS.map(async ({ model, vectors, tokens, perCall }) => {
          const expected = await vectors(TEXTS);
          const found: Record<string, number[][]> = {
            'openai SDK, base64': (await openai.embeddings.create({ model, input: TEXTS })).data.map((item) => item.embedding),
            'openai SDK, floats': (await openai.embeddings.create({ model, input: TEXTS, encoding_format: 'float' })).data.map((item) => item.embedding),
            'AI SDK, embedMany': (await embedMany({ model: aiSdk.embedding(model), values: TEXTS, maxRetries: 0 })).embeddings,
            'AI SDK, embed': [(await embed({ model: aiSdk.embedding(model), value: TEXTS[0]!, maxRetries: 0 })).embedding],
            'LangChain, embedDocuments': await langchain(model).embedDocuments(TEXTS),
            'LangChain, embedQuery': [await langchain(model).embedQuery(TEXTS[0]!)],
          };
          for (const [client, vectorsFound] of Object.entries(found)) t.deepEqual(vectorsFound, expected.slice(0, vectorsFound.length), `${model}: ${client}`);

          const res = await fetch(`${server.url}/v1/embeddings`, {
            method: 'POST',
            headers: { authorization: `Bearer ${metered}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model, input: TEXTS, encoding_format: 'base64' }),
          });
          t.truthy(res.headers.get('x-kmg-budget-remaining-usd'), `${model}: the budget left`);
          const answer = (await res.json()) as { data: Array<{ embedding: string }>; usage: { prompt_tokens: number } };
          t.deepEqual(
            answer.data.map((item) => decoded(item.embedding)),
            expected,
            `${model}: base64 decoded`,
          );
          t.is(answer.usage.prompt_tokens, tokens, `${model}: its provider's count`);

          if (perCall === undefined) return;
          const batch = Array.from({ length: perCall.limit + 1 }, (_, at) => `passage ${at}`);
          const before = perCall.sent().length;
          const joined = await openai.embeddings.create({ model, input: batch });
          t.deepEqual(perCall.sent().slice(before), [perCall.limit, 1], `${model}: inputs a call`);
          t.deepEqual(
            joined.data.map((item) => item.embedding),
            await vectors(batch),
            `${model}: joined in order`,
          );
        }),
      );
      t.deepEqual(problems, []);

      const records = await until(
        () => server.deployment.usageStore.list({ account: meteredAccount }),
        (found) => found.length === EMBEDDERS.length,
      );
      const scraped = parseMetrics(await server.deployment.metrics!.metrics.registry.metrics());
      for (const { model, provider, tokens, price } of EMBEDDERS) {
        const cost = Math.round(tokens * price * 1e6);
        t.like(
          records.find((record) => record.model === model),
          { provider, endpoint: '/v1/embeddings', status: 200, inputTokens: tokens, outputTokens: 0, costPicoUsd: cost },
          model,
        );
        t.is(Math.round((value(scraped, 'kmg_cost_usd_total', { model, account: meteredAccount }) ?? 0) * 1e12), cost, `${model}: its cost metric`);
        t.true((value(scraped, 'kmg_model_tokens_total', { model, direction: 'input' }) ?? 0) >= tokens, `${model}: its tokens metric`);
        t.true((value(scraped, 'kmg_upstream_attempts_total', { provider, model, outcome: 'ok' }) ?? 0) > 0, `${model}: its attempts metric`);
      }
    },
  );
}
