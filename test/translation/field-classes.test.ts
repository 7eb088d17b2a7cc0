import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import test from 'ava';
import { createGatewayMetrics } from '../../lib/metrics/gateway-metrics.js';
import { CHAT_REQUEST_FIELDS } from '../../lib/models/formats/chat-completions/request.js';
import { translationTable } from '../../lib/models/formats/field-table.js';
import { MESSAGES_REQUEST_FIELDS } from '../../lib/models/formats/messages/request.js';
import { classOf, type FieldRule, type FormatName } from '../../lib/models/formats/wire-format.js';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { modelsApp, type ModelsApp } from '../helpers/models-app.js';
import { mockProviders, type MockProviders } from '../helpers/models-upstream.js';

// The four classes of a field in a translated call (docs/TRANSLATION.md), through the lib's models
// router against mock upstreams: what is carried each way, what is left out and named in
// x-kmg-omitted, what is made valid before it is sent. The tests share the upstream: serial.

let mock: MockProviders;
let app: ModelsApp;
let key: string;
test.before(async () => {
  mock = await mockProviders();
  app = await modelsApp({
    providers: [
      openAIProvider({ id: 'chat-only', baseURL: `${mock.url}/v1`, endpoints: ['chat.completions'] }),
      openAIProvider({ id: 'responses-only', baseURL: `${mock.url}/v1`, endpoints: ['responses'] }),
      anthropicProvider({ id: 'anthropic', baseURL: mock.url }),
      echoProvider({ id: 'local' }),
    ],
    catalog: [
      { id: 'gpt', provider: 'chat-only' },
      { id: 'gpt-responses', provider: 'responses-only' },
      { id: 'claude', provider: 'anthropic' },
      { id: 'echo', provider: 'local' },
    ],
  });
  key = await app.keyFor();
});
const sdkRequests = JSON.parse(readFileSync(new URL('../../../test/fixtures/sdk-requests/requests.json', import.meta.url), 'utf8')) as SdkRequest[];
test.after.always(() => Promise.all([app?.close(), mock?.close()]));
const hi = [{ role: 'user', content: 'hi' }];
const chat = (body: Record<string, unknown>) =>
  app.post('/v1/chat/completions', { model: 'claude', messages: hi, ...body }, { authorization: `Bearer ${key}` });
const responses = (body: Record<string, unknown>) => app.post('/v1/responses', { model: 'claude', input: 'hi', ...body }, { authorization: `Bearer ${key}` });
const messages = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  app.post('/v1/messages', { model: 'gpt', max_tokens: 10_000, messages: hi, ...body }, { 'x-api-key': key, ...headers });
/** The body the upstream got last. */
const sent = () => mock.calls.at(-1)?.body ?? {};

test('docs/TRANSLATION.md is the table the code says: `npm run docs:translation` writes it', async (t) => {
  const committed = await readFile(new URL('../../../docs/TRANSLATION.md', import.meta.url), 'utf8');
  t.is(committed, translationTable());
});

test.serial('hints that cannot change the answer are left out and named in x-kmg-omitted, on JSON and streamed answers', async (t) => {
  const hints = { prompt_cache_key: 'tenant-7', store: true, metadata: { team: 'a' } };
  const whole = await chat(hints);
  t.is(whole.status, 200);
  // In the order the client sent them.
  t.is(whole.headers.get('x-kmg-omitted'), 'prompt_cache_key,store,metadata');
  const upstream = sent();
  t.false(['prompt_cache_key', 'store', 'metadata'].some((field) => field in upstream));
  const streamed = await chat({ ...hints, stream: true });
  t.is(streamed.headers.get('x-kmg-omitted'), 'prompt_cache_key,store,metadata');
  t.true((await streamed.text()).includes('[DONE]'));
  // A default value is no hint: nothing to name.
  t.is((await chat({ store: false })).headers.get('x-kmg-omitted'), null);
  const truncated = await responses({ truncation: 'auto', store: true, prompt_cache_retention: '24h' });
  t.is(truncated.status, 200);
  t.is(truncated.headers.get('x-kmg-omitted'), 'truncation,store,prompt_cache_retention');
});

test.serial('betas for features a translated call does not use are left out, named; the token-counting beta counts', async (t) => {
  const answer = await messages({}, { 'anthropic-beta': 'interleaved-thinking-2025-05-14,context-1m-2025-08-07' });
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-omitted'), 'anthropic-beta:interleaved-thinking-2025-05-14,anthropic-beta:context-1m-2025-08-07');
  const count = await app.post(
    '/v1/messages/count_tokens',
    { model: 'gpt', messages: hi },
    { 'x-api-key': key, 'anthropic-beta': 'token-counting-2024-11-01' },
  );
  t.is(count.status, 200);
  t.like(await count.json(), { input_tokens: 1 });
});

test('the omitted fields are counted by name', async (t) => {
  const metrics = createGatewayMetrics();
  metrics.observeRouting({ attempts: [], cooldowns: [], omitted: ['store', 'prompt_cache_key'] });
  metrics.observeRouting({ attempts: [], cooldowns: [], omitted: ['store'] });
  const text = await metrics.registry.metrics();
  t.regex(text, /kmg_translation_omitted_total\{field="store"\} 2/);
  t.regex(text, /kmg_translation_omitted_total\{field="prompt_cache_key"\} 1/);
});

test.serial('strict function tools are carried each way', async (t) => {
  const parameters = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
  t.is((await chat({ tools: [{ type: 'function', function: { name: 'weather', parameters, strict: true } }] })).status, 200);
  t.deepEqual(sent().tools, [{ name: 'weather', input_schema: parameters, strict: true }]);
  t.is((await messages({ tools: [{ name: 'weather', input_schema: parameters, strict: true }] })).status, 200);
  t.deepEqual(sent().tools, [{ type: 'function', function: { name: 'weather', parameters, strict: true } }]);
  t.is((await messages({ model: 'gpt-responses', tools: [{ name: 'weather', input_schema: parameters, strict: true }] })).status, 200);
  t.like(sent(), { tools: [{ type: 'function', name: 'weather', strict: true }] });
});

test.serial("reasoning efforts and thinking budgets are carried each way, by the efforts' table", async (t) => {
  const budgets: Array<[string, number]> = [
    ['minimal', 1024],
    ['low', 2048],
    ['medium', 8192],
    ['high', 24_576],
  ];
  for (const [effort, budget] of budgets) {
    t.is((await chat({ reasoning_effort: effort, max_completion_tokens: 30_000 })).status, 200, effort);
    t.deepEqual(sent().thinking, { type: 'enabled', budget_tokens: budget }, effort);
    t.is((await messages({ thinking: { type: 'enabled', budget_tokens: budget } })).status, 200, effort);
    t.is(sent().reasoning_effort, effort, `${budget} back`);
  }
  t.is((await chat({ reasoning_effort: 'none' })).status, 200);
  t.false('thinking' in sent());
  // Amid a tool loop whose calls came without their signed thinking (Chat Completions has no place
  // for it): this turn goes without thinking, named, where Anthropic would refuse it.
  const loop = [
    ...hi,
    { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'toolu_1', content: 'done' },
  ];
  const unsigned = await chat({
    reasoning_effort: 'low',
    messages: loop,
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  });
  t.is(unsigned.status, 200);
  t.is(unsigned.headers.get('x-kmg-omitted'), 'reasoning_effort');
  t.false('thinking' in sent());
  // Adaptive: as much as the model decides, its default; an explicit effort is the effort.
  t.is((await messages({ thinking: { type: 'adaptive' } })).status, 200);
  t.false('reasoning_effort' in sent());
  t.is((await messages({ thinking: { type: 'adaptive' }, output_config: { effort: 'low' } })).status, 200);
  t.is(sent().reasoning_effort, 'low');
  t.is((await messages({ model: 'gpt-responses', thinking: { type: 'enabled', budget_tokens: 3000 } })).status, 200);
  t.deepEqual(sent().reasoning, { effort: 'medium' });
  t.is((await responses({ reasoning: { effort: 'minimal' }, max_output_tokens: 5000 })).status, 200);
  t.deepEqual(sent().thinking, { type: 'enabled', budget_tokens: 1024 });
});

test.serial("the end user's id, the service tier and verbosity are carried each way where both formats have them", async (t) => {
  t.is((await chat({ safety_identifier: 'user-42', service_tier: 'auto' })).status, 200);
  t.like(sent(), { metadata: { user_id: 'user-42' }, service_tier: 'auto' });
  t.is((await chat({ user: 'user-7' })).status, 200);
  t.like(sent(), { metadata: { user_id: 'user-7' } });
  t.is((await messages({ metadata: { user_id: 'user-42' }, service_tier: 'standard_only' })).status, 200);
  t.like(sent(), { user: 'user-42', service_tier: 'default' });
  t.is((await messages({ model: 'gpt-responses', service_tier: 'auto' })).status, 200);
  t.like(sent(), { service_tier: 'auto' });
  // Verbosity between the two OpenAI formats.
  t.is((await chat({ model: 'gpt-responses', verbosity: 'low' })).status, 200);
  t.like(sent(), { text: { verbosity: 'low' } });
  t.is((await responses({ model: 'gpt', text: { verbosity: 'high' } })).status, 200);
  t.like(sent(), { verbosity: 'high' });
});

test.serial('what the gateway answered and the SDK helpers add to a message are accepted back, on a translated model', async (t) => {
  const answered = {
    role: 'assistant',
    content: null,
    refusal: null,
    annotations: [],
    parsed: null,
    tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}', parsed_arguments: { city: 'Paris' } } }],
  };
  const tools = [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: {} } } }];
  const answer = await chat({ tools, messages: [...hi, answered, { role: 'tool', tool_call_id: 'toolu_1', content: '18°C' }] });
  t.is(answer.status, 200);
  t.is(answer.headers.get('x-kmg-omitted'), null);
  t.deepEqual(sent().messages, [
    { role: 'user', content: [{ type: 'text', text: 'hi' }] },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '18°C' }] }] },
  ]);
  // Citations of an earlier answer are for the client's eyes: left out, named.
  const cited = await chat({
    messages: [
      ...hi,
      {
        role: 'assistant',
        content: 'See it.',
        annotations: [{ type: 'url_citation', url_citation: { url: 'https://x', title: 'x', start_index: 0, end_index: 3 } }],
      },
      ...hi,
    ],
  });
  t.is(cited.status, 200);
  t.is(cited.headers.get('x-kmg-omitted'), 'annotations');
  // Thinking another model gave (no signature of Anthropic's) cannot go to Claude: left out, named.
  const unsigned = await chat({
    messages: [...hi, { role: 'assistant', content: 'Hi.', thinking_blocks: [{ type: 'thinking', thinking: 'Hmm.', signature: '' }] }, ...hi],
  });
  t.is(unsigned.status, 200);
  t.is(unsigned.headers.get('x-kmg-omitted'), 'thinking');
  t.like((sent().messages as unknown[])[1], { role: 'assistant', content: [{ type: 'text', text: 'Hi.' }] });
});

test.serial('a conversation of only system instructions reaches a Claude model with their text as its user turn, never as an upstream 400', async (t) => {
  const before = mock.calls.length;
  t.is(
    (
      await chat({
        messages: [
          { role: 'system', content: 'Say hello.' },
          { role: 'developer', content: 'In French.' },
        ],
      })
    ).status,
    200,
  );
  t.like(sent(), { messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.\n\nIn French.' }] }] });
  t.false('system' in sent());
  t.is((await responses({ input: [], instructions: 'Say hello.' })).status, 200);
  t.like(sent(), { messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }] });
  // Nothing at all to send: the gateway's own 400, naming it.
  const empty = await responses({ input: [] });
  t.is(empty.status, 400);
  t.like(await empty.json(), { error: { message: "'input' must hold a user turn with content" } });
  t.is(mock.calls.length, before + 2);
});

/** The fields `name` of the installed @anthropic-ai/sdk declares required (no `?`), read from its types in `file`. */
async function declaredFields(name: string, file = 'resources/messages/messages.d.ts'): Promise<string[]> {
  const types = await readFile(new URL(`../../../node_modules/@anthropic-ai/sdk/${file}`, import.meta.url), 'utf8');
  const body = new RegExp(`^export interface ${name} \\{\\n([\\s\\S]*?)^\\}`, 'm').exec(types)?.[1] ?? '';
  return [...body.matchAll(/^ {4}(\w+):/gm)].map((match) => match[1] as string);
}

test.serial("an Anthropic Message, translated or echoed, whole or streamed, has every field the installed SDK's Message and Usage declare", async (t) => {
  const [message, usage] = [await declaredFields('Message'), await declaredFields('Usage')];
  t.true(message.includes('container') && usage.includes('service_tier'), 'the SDK declares what the issue named');
  const check = (answer: Record<string, unknown>, what: string) => {
    t.deepEqual(
      message.filter((field) => !(field in answer)),
      [],
      what,
    );
    t.deepEqual(
      usage.filter((field) => !(field in (answer.usage as object))),
      [],
      `${what}: usage`,
    );
  };
  for (const model of ['gpt', 'gpt-responses', 'echo']) {
    check((await (await messages({ model })).json()) as Record<string, unknown>, model);
    const text = await (await messages({ model, stream: true })).text();
    const start = /data: (\{"type":"message_start".*)/.exec(text)?.[1] ?? '{}';
    check((JSON.parse(start) as { message: Record<string, unknown> }).message, `${model}, streamed`);
  }
});

// The SDKs' own generated "all params" requests (test/fixtures/sdk-requests), replayed through a
// translated model each way: each refusal (400) is recorded, its field taken out, and the request
// sent again until it is answered. Every field refused must be of class `refused`, every one named
// in x-kmg-omitted of class `omitted`; what is left is carried.
interface SdkRequest {
  source: { repo: string; test: string };
  endpoint: '/v1/chat/completions' | '/v1/messages' | '/v1/messages/count_tokens';
  body: Record<string, unknown>;
}
const TABLES = { '/v1/chat/completions': CHAT_REQUEST_FIELDS, '/v1/messages': MESSAGES_REQUEST_FIELDS, '/v1/messages/count_tokens': MESSAGES_REQUEST_FIELDS };
const TARGETS: Record<string, FormatName> = { claude: 'Messages', gpt: 'Chat Completions', 'gpt-responses': 'Responses' };

/** `body` without the field at `path` (`tools[0].function.strict`); what follows a space in a refusal's name is not part of it. */
function without(body: Record<string, unknown>, path: string): Record<string, unknown> {
  const copy = structuredClone(body);
  const keys = (path.split(' ')[0] as string).split(/\.|\[(\d+)\]/).filter((key) => key !== undefined && key !== '');
  let parent: Record<string, unknown> = copy;
  for (const key of keys.slice(0, -1)) parent = parent[key] as Record<string, unknown>;
  delete parent[keys.at(-1) as string];
  return copy;
}

async function replay(request: SdkRequest, model: string) {
  const headers = request.endpoint === '/v1/chat/completions' ? { authorization: `Bearer ${key}` } : { 'x-api-key': key };
  let body: Record<string, unknown> = { ...request.body, model };
  const refused: string[] = [];
  const invalid: string[] = [];
  for (let turn = 0; turn < 30; turn++) {
    const answer = await app.post(request.endpoint, body, headers);
    const answered = (await answer.json()) as { error?: { message: string } };
    if (answer.status === 200) return { refused, invalid, omitted: answer.headers.get('x-kmg-omitted')?.split(',') ?? [] };
    const error = answered.error ?? { message: '' };
    const param = /^'([^']+)'/.exec(error.message)?.[1];
    if (answer.status !== 400 || param === undefined) throw new Error(`${answer.status}: ${error.message}`);
    (error.message.includes('cannot be sent to this model') ? refused : invalid).push(param);
    body = without(body, param);
  }
  throw new Error('still refused after 30 fields');
}

// The SDKs' fixtures set both max_tokens and max_completion_tokens, a max_completion_tokens of 0,
// and stream_options without a stream, which OpenAI refuses too: validated locally, as for a
// native call.
const CHAT_INVALID = ['max_tokens', 'max_completion_tokens', 'stream_options'];
const ANTHROPIC_REFUSED = ['tools[0].defer_loading', 'tools[0].input_examples'];
const REPLAYS: Array<[number, string, { refused: string[]; invalid: string[]; omitted: string[] }]> = [
  [
    0,
    'claude',
    {
      refused: [
        'audio',
        'frequency_penalty',
        'function_call',
        'functions',
        'logit_bias',
        'logprobs',
        'moderation',
        'prediction',
        'presence_penalty',
        'seed',
        'top_logprobs',
        'verbosity',
        'web_search_options',
        'messages[0].name',
      ],
      invalid: CHAT_INVALID,
      omitted: ['metadata', 'prompt_cache_key', 'prompt_cache_options', 'prompt_cache_retention', 'store', 'user'],
    },
  ],
  [
    0,
    'gpt-responses',
    {
      refused: [
        'audio',
        'frequency_penalty',
        'function_call',
        'functions',
        'logit_bias',
        'logprobs',
        'moderation',
        'prediction',
        'presence_penalty',
        'seed',
        'stop',
        'top_logprobs',
        'web_search_options',
        'messages[0].name',
      ],
      invalid: CHAT_INVALID,
      omitted: ['store'],
    },
  ],
  [
    1,
    'gpt',
    { refused: ['container', 'inference_geo', 'top_k', 'user_profile_id', ...ANTHROPIC_REFUSED], invalid: [], omitted: ['cache_control', 'citations'] },
  ],
  [
    1,
    'gpt-responses',
    {
      refused: ['container', 'inference_geo', 'stop_sequences', 'top_k', 'user_profile_id', ...ANTHROPIC_REFUSED],
      invalid: [],
      omitted: ['cache_control', 'citations'],
    },
  ],
  [2, 'gpt', { refused: ['user_profile_id', ...ANTHROPIC_REFUSED], invalid: [], omitted: ['cache_control', 'citations'] }],
];
for (const [index, model, expected] of REPLAYS) {
  const request = sdkRequests[index] as SdkRequest;
  test.serial(`${request.source.repo} "${request.source.test}" (${request.endpoint}) through ${model}: each field in its class`, async (t) => {
    const replayed = await replay(request, model);
    const fields = TABLES[request.endpoint];
    const target = TARGETS[model] as FormatName;
    for (const name of replayed.refused.filter((param) => Object.hasOwn(fields, param.split(' ')[0] as string))) {
      t.is(classOf(fields[name.split(' ')[0] as string] as FieldRule, target), 'refused', name);
    }
    // `user` is carried, and omitted only beside the `safety_identifier` carried in its place.
    for (const name of replayed.omitted.filter((field) => Object.hasOwn(fields, field) && field !== 'user'))
      t.is(classOf(fields[name] as FieldRule, target), 'omitted', name);
    t.deepEqual(replayed, expected);
  });
}

test("a model in Anthropic's shape has every field the installed SDK's ModelInfo declares", async (t) => {
  const declared = await declaredFields('ModelInfo', 'resources/models.d.ts');
  t.true(declared.includes('max_input_tokens') && declared.includes('max_tokens'), 'the SDK declares what the issue named');
  const answer = await fetch(`${app.url}/v1/models/claude`, { headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' } });
  const model = (await answer.json()) as Record<string, unknown>;
  t.deepEqual(
    declared.filter((field) => !(field in model)),
    [],
  );
});
