import test from 'ava';
import { anthropicProvider } from '../../lib/models/providers/anthropic/index.js';
import { bedrockProvider } from '../../lib/models/providers/bedrock/index.js';
import { echoProvider } from '../../lib/models/providers/echo/index.js';
import { geminiProvider } from '../../lib/models/providers/gemini/index.js';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { vertexAnthropicProvider, vertexProvider } from '../../lib/models/providers/vertex/index.js';
import { providerContract, type UpstreamScript } from '../../lib/testing/index.js';
import { converseAnswer, frame, MOCK_CREDENTIALS, MOCK_REGION, textStream } from '../helpers/bedrock-mock.js';

// The built-in providers keep the contract a third-party provider runs (examples/cohere-provider/).

const event = (data: unknown, name?: string) => `${name === undefined ? '' : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`;

const completion = { id: 'chatcmpl-1', created: 1, model: 'gpt-upstream' };
const chunk = (delta: unknown, finish: string | null) =>
  event({ ...completion, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] });
const response = (status: string, usage: unknown) => ({ id: 'resp_1', object: 'response', created_at: 1, status, model: 'gpt-upstream', output: [], usage });
const message = { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-upstream', stop_sequence: null };

providerContract(test, {
  name: 'openAIProvider',
  create: (baseURL) => openAIProvider({ id: 'openai', baseURL: `${baseURL}/v1`, apiKey: 'sk-provider' }),
  upstream: {
    chatCompletions: {
      path: '/v1/chat/completions',
      answer: {
        ...completion,
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 },
      },
      events: [
        chunk({ role: 'assistant', content: '' }, null),
        chunk({ content: 'Hi' }, 'stop'),
        event({ ...completion, object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 } }),
        'data: [DONE]\n\n',
      ],
      usage: { inputTokens: 9, outputTokens: 3 },
    },
    responses: {
      path: '/v1/responses',
      answer: response('completed', { input_tokens: 5, output_tokens: 2, total_tokens: 7 }),
      events: [
        event({ type: 'response.created', sequence_number: 0, response: response('in_progress', null) }, 'response.created'),
        event(
          { type: 'response.output_text.delta', sequence_number: 1, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hi' },
          'response.output_text.delta',
        ),
        event(
          { type: 'response.completed', sequence_number: 2, response: response('completed', { input_tokens: 5, output_tokens: 2, total_tokens: 7 }) },
          'response.completed',
        ),
      ],
      usage: { inputTokens: 5, outputTokens: 2 },
    },
  },
});

// Anthropic's Messages, as api.anthropic.com and Vertex AI's rawPredict answer it.
const messagesScript: Omit<UpstreamScript, 'path'> = {
  answer: { ...message, content: [{ type: 'text', text: 'Hi' }], stop_reason: 'end_turn', usage: { input_tokens: 8, output_tokens: 2 } },
  events: [
    event({ type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 8, output_tokens: 1 } } }, 'message_start'),
    event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
    event({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } }, 'content_block_delta'),
    event({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
    event({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }, 'message_delta'),
    event({ type: 'message_stop' }, 'message_stop'),
  ],
  error: (_status, text) => ({ type: 'error', error: { type: 'invalid_request_error', message: text } }),
  usage: { inputTokens: 8, outputTokens: 2 },
};

providerContract(test, {
  name: 'anthropicProvider',
  create: (baseURL) => anthropicProvider({ id: 'anthropic', baseURL, apiKey: 'sk-ant-provider' }),
  upstream: {
    messages: { ...messagesScript, path: '/v1/messages' },
    countTokens: { path: '/v1/messages/count_tokens', answer: { input_tokens: 12 } },
  },
});

const vertexClaude = '/v1/projects/p/locations/us-east5/publishers/anthropic/models';
providerContract(test, {
  name: 'vertexAnthropicProvider',
  create: (baseURL) =>
    vertexAnthropicProvider({ id: 'vertex-claude', project: 'p', location: 'us-east5', baseURL, auth: { getAccessToken: async () => 'vertex-token' } }),
  upstream: {
    messages: { ...messagesScript, path: `${vertexClaude}/upstream-model-4e1b:rawPredict` },
    countTokens: { path: `${vertexClaude}/count-tokens:rawPredict`, answer: { input_tokens: 12 } },
  },
});

providerContract(test, {
  name: 'echoProvider',
  create: () => echoProvider({ id: 'echo' }),
  offline: ['chatCompletions', 'responses', 'messages', 'countTokens'],
});

test('providerContract() refuses a stream script it cannot hold back an event of', (t) => {
  const upstream = { chatCompletions: { path: '/chat', answer: {}, events: ['data: [DONE]\n\n'] } };
  t.throws(() => providerContract(() => undefined, { name: 'short', create: () => echoProvider({ id: 'echo' }), upstream }), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: providerContract(): upstream.chatCompletions.events must hold at least two events',
  });
});

const geminiChunk = (parts: unknown[], extra: Record<string, unknown> = {}) => ({
  candidates: [{ content: { role: 'model', parts }, index: 0, ...extra }],
  modelVersion: 'gemini-upstream',
});
const geminiUsage = { promptTokenCount: 7, candidatesTokenCount: 2, thoughtsTokenCount: 1, totalTokenCount: 10 };

const geminiScript = {
  answer: { ...geminiChunk([{ text: 'Hi' }], { finishReason: 'STOP' }), usageMetadata: geminiUsage },
  events: [event(geminiChunk([{ text: 'H' }])), event({ ...geminiChunk([{ text: 'i' }], { finishReason: 'STOP' }), usageMetadata: geminiUsage })],
  error: (status: number, message: string) => ({ error: { code: status, message, status: status === 429 ? 'RESOURCE_EXHAUSTED' : 'INVALID_ARGUMENT' } }),
  usage: { inputTokens: 7, outputTokens: 3 },
};

providerContract(test, {
  name: 'geminiProvider',
  create: (baseURL) => geminiProvider({ id: 'gemini', baseURL, apiKey: 'gemini-provider-key' }),
  upstream: {
    neutral: { ...geminiScript, path: '/v1beta/models/upstream-model-4e1b:generateContent' },
  },
});

providerContract(test, {
  name: 'vertexProvider',
  create: (baseURL) => vertexProvider({ id: 'vertex', project: 'p', location: 'us-central1', baseURL, auth: { getAccessToken: async () => 'vertex-token' } }),
  upstream: { neutral: { ...geminiScript, path: '/v1/projects/p/locations/us-central1/publishers/google/models/upstream-model-4e1b:generateContent' } },
});

// Bedrock's binary EventStream: the first chunk holds the start and the first text, which the provider passes on together.
const [bedrockStart, ...bedrockRest] = textStream(['H', 'i'], { inputTokens: 7, outputTokens: 3 }).map(frame);
providerContract(test, {
  name: 'bedrockProvider',
  create: (baseURL) => bedrockProvider({ id: 'bedrock', region: MOCK_REGION, baseURL, credentials: async () => MOCK_CREDENTIALS }),
  upstream: {
    neutral: {
      path: '/model/upstream-model-4e1b/converse',
      answer: converseAnswer([{ text: 'Hi' }], 'end_turn', { inputTokens: 7, outputTokens: 3 }),
      events: [Buffer.concat([bedrockStart!, bedrockRest[0]!]), ...bedrockRest.slice(1)],
      eventsContentType: 'application/vnd.amazon.eventstream',
      error: (_status, message) => ({ message }),
      usage: { inputTokens: 7, outputTokens: 3 },
    },
  },
});
