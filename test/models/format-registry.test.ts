import test from 'ava';
import { SCOPES } from '../../lib/auth/scopes.js';
import { FORMATS, TRANSLATIONS } from '../../lib/models/formats/registry.js';
import { modelsRouter } from '../../lib/models/models-router.js';
import type { ProviderEndpoint } from '../../lib/models/provider.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { AnswerReader } from '../../lib/tracing/answer-reader.js';

// The compiler holds each descriptor to every field of `Format`; these hold the registry to what
// its readers assume of the values.

test('each format is listed under its own endpoint, at a path of its own, behind a scope keys can hold', (t) => {
  const formats = Object.entries(FORMATS);
  for (const [endpoint, format] of formats) {
    t.is(format.endpoint as string, endpoint);
    t.true((SCOPES as readonly string[]).includes(format.scope), `${format.name}: its scope`);
  }
  t.is(new Set(formats.map(([, format]) => format.path)).size, formats.length);
});

test('modelsRouter() serves every format of the registry at its path, and nothing else by POST', (t) => {
  const router = modelsRouter({ catalog: [{ id: 'echo-1', provider: 'echo' }], providers: [echoProvider({ id: 'echo' })] });
  const posted = router.stack.filter((layer) => layer.methods.includes('POST')).map((layer) => layer.path);
  t.deepEqual(
    posted.sort(),
    Object.values(FORMATS)
      .map((format) => format.path)
      .sort(),
  );
});

test('the translated formats are those with a translation that reads clients and writes to providers', (t) => {
  t.deepEqual(Object.keys(TRANSLATIONS).sort(), ['chatCompletions', 'messages', 'responses']);
  for (const wire of Object.values(TRANSLATIONS)) t.truthy(wire.provider, `${wire.name}: a provider side`);
});

// A usage object of each format, with cache reads (and, where the format has them, writes and reasoning).
const USAGE: Partial<Record<ProviderEndpoint, Record<string, unknown>>> = {
  chatCompletions: {
    prompt_tokens: 30,
    completion_tokens: 12,
    prompt_tokens_details: { cached_tokens: 10 },
    completion_tokens_details: { reasoning_tokens: 5 },
  },
  responses: { input_tokens: 30, output_tokens: 12, input_tokens_details: { cached_tokens: 10 }, output_tokens_details: { reasoning_tokens: 5 } },
  messages: { input_tokens: 15, cache_read_input_tokens: 10, cache_creation_input_tokens: 5, output_tokens: 12 },
  embeddings: { prompt_tokens: 30, total_tokens: 30 },
};

test("metering and tracing read a format's usage through its one reader: the same counts", (t) => {
  for (const [endpoint, usage] of Object.entries(USAGE) as Array<[ProviderEndpoint, Record<string, unknown>]>) {
    const format = FORMATS[endpoint];
    const read = format.readUsage(usage);
    t.is(read.inputTokens, 30, `${format.name}: input, cache reads and writes included`);
    const answer = endpoint === 'responses' ? { object: 'response', status: 'completed', model: 'm', usage } : { model: 'm', usage };
    t.deepEqual(format.answer.json(answer, 'catalog-id'), read, `${format.name}: metering`);
    const reader = new AnswerReader(endpoint, false);
    reader.json(answer);
    const traced = reader.attributes();
    t.is(traced['gen_ai.usage.input_tokens'], read.inputTokens, `${format.name}: tracing`);
    t.is(traced['gen_ai.usage.cache_read.input_tokens'], read.cacheReadTokens, `${format.name}: tracing's cache reads`);
    t.is(traced['gen_ai.usage.reasoning.output_tokens'], read.reasoningTokens, `${format.name}: tracing's reasoning`);
  }
});
