/**
 * A model provider that answers at once: POST /v1/chat/completions (OpenAI), /v1/messages
 * (Anthropic) and /v1/responses (OpenAI's Responses API), each with a small fixed JSON answer
 * carrying `usage`, or with `"stream": true` an event stream in the provider's own format: the
 * opening events, a pause of FIRST_TOKEN_MS, STREAM_EVENTS text deltas (each its own write, the
 * loop yielding between them, as tokens arrive), then the closing events with the usage where
 * that provider puts it (Chat Completions: a last chunk with `usage` when
 * `stream_options.include_usage` asks for it; Messages: `message_start` and `message_delta`;
 * Responses: `response.completed`). POST /v1/embeddings (OpenAI) answers one vector of
 * EMBEDDING_DIMENSIONS per input, in base64 unless `encoding_format: "float"`, never streamed.
 * PUT /mock `{"hold": true}` holds new streams open after their opening events; `{"hold": false}`
 * ends every held stream (with one delta and the closing events) and stops holding.
 * GET /healthz: 200. Plain node:http, so that it costs as little as it can.
 * Run: PORT=8082 STREAM_EVENTS=1000 node --import tsx bench/servers/mock-upstream.ts
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { text } from 'node:stream/consumers';

const port = Number(process.env.PORT ?? 8082);
const streamEvents = Number(process.env.STREAM_EVENTS ?? 1000);
/**
 * As a model takes a while to its first token. Without it the deltas' writes start at once and
 * keep the mock busy on the core it shares with the load generator, which then reads a gateway's
 * first event only when the scheduler lets it: that, not the gateway, was most of the time to
 * the first byte.
 */
const FIRST_TOKEN_MS = 5;
let hold = false;
/** Streams held open after their opening events, each let go by its function. */
const held = new Set<() => void>();

const CREATED = 1_744_000_000;
const INPUT_TOKENS = 12;
const TEXT = 'Hello!';

type Body = Record<string, unknown>;

interface Format {
  answer(model: string): unknown;
  /** What the stream sends before the deltas, the delta, and what ends it, for `deltas` deltas. */
  stream(model: string, body: Body): { opening: string[]; delta: string; closing(deltas: number): string[] };
}

const data = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
const event = (type: string, value: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...value })}\n\n`;

const chatCompletions: Format = {
  answer: (model) => ({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: CREATED,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: TEXT, refusal: null }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: INPUT_TOKENS, completion_tokens: 2, total_tokens: INPUT_TOKENS + 2 },
  }),
  stream(model, body) {
    const chunk = (choices: unknown[], extra: Body = {}) =>
      data({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: CREATED, model, choices, ...extra });
    const options = body.stream_options as { include_usage?: unknown } | undefined;
    const withUsage = options?.include_usage === true;
    const choice = (delta: Body, finish: string | null) => ({ index: 0, delta, logprobs: null, finish_reason: finish });
    return {
      opening: [chunk([choice({ role: 'assistant', content: '' }, null)], withUsage ? { usage: null } : {})],
      delta: chunk([choice({ content: 'tok' }, null)], withUsage ? { usage: null } : {}),
      closing: (deltas) => [
        chunk([choice({}, 'stop')], withUsage ? { usage: null } : {}),
        ...(withUsage ? [chunk([], { usage: { prompt_tokens: INPUT_TOKENS, completion_tokens: deltas, total_tokens: INPUT_TOKENS + deltas } })] : []),
        'data: [DONE]\n\n',
      ],
    };
  },
};

const messages: Format = {
  answer: (model) => ({
    id: 'msg_bench',
    type: 'message',
    role: 'assistant',
    model,
    content: [{ type: 'text', text: TEXT }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: INPUT_TOKENS, output_tokens: 2 },
  }),
  stream: (model) => ({
    opening: [
      event('message_start', {
        message: {
          id: 'msg_bench',
          type: 'message',
          role: 'assistant',
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: INPUT_TOKENS, output_tokens: 1 },
        },
      }),
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ],
    delta: event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'tok' } }),
    closing: (deltas) => [
      event('content_block_stop', { index: 0 }),
      event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: deltas } }),
      event('message_stop', {}),
    ],
  }),
};

function response(model: string, status: string, output: unknown[], usage: unknown): Body {
  return { id: 'resp_bench', object: 'response', created_at: CREATED, status, model, output, usage };
}

const responsesUsage = (outputTokens: number) => ({
  input_tokens: INPUT_TOKENS,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: outputTokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: INPUT_TOKENS + outputTokens,
});

const outputMessage = (content: unknown[], status: string) => ({ type: 'message', id: 'msg_bench', status, role: 'assistant', content });

const responses: Format = {
  answer: (model) => response(model, 'completed', [outputMessage([{ type: 'output_text', text: TEXT, annotations: [] }], 'completed')], responsesUsage(2)),
  stream(model) {
    let sequence = 0;
    const next = (type: string, value: Body) => event(type, { sequence_number: sequence++, ...value });
    const part = { type: 'output_text', text: '', annotations: [] };
    return {
      opening: [
        next('response.created', { response: response(model, 'in_progress', [], null) }),
        next('response.in_progress', { response: response(model, 'in_progress', [], null) }),
        next('response.output_item.added', { output_index: 0, item: outputMessage([], 'in_progress') }),
        next('response.content_part.added', { item_id: 'msg_bench', output_index: 0, content_index: 0, part }),
      ],
      // One delta string for every token: the sequence number stays that of the first (no client checks it).
      delta: next('response.output_text.delta', { item_id: 'msg_bench', output_index: 0, content_index: 0, delta: 'tok' }),
      closing: (deltas) => {
        const done = { ...part, text: 'tok'.repeat(deltas) };
        return [
          next('response.output_text.done', { item_id: 'msg_bench', output_index: 0, content_index: 0, text: done.text }),
          next('response.content_part.done', { item_id: 'msg_bench', output_index: 0, content_index: 0, part: done }),
          next('response.output_item.done', { output_index: 0, item: outputMessage([done], 'completed') }),
          next('response.completed', { response: response(model, 'completed', [outputMessage([done], 'completed')], responsesUsage(deltas)) }),
        ];
      },
    };
  },
};

/** As text-embedding-3-small's: a base64 vector of 8 KiB, what a gateway relays per input. */
const EMBEDDING_DIMENSIONS = 1536;
const VECTOR = Float32Array.from({ length: EMBEDDING_DIMENSIONS }, (_, at) => Math.sin(at) / 40);
const BASE64_VECTOR = Buffer.from(VECTOR.buffer).toString('base64');
const FLOAT_VECTOR = Array.from(VECTOR);

/** OpenAI's embeddings answer, one vector per input. */
function embeddings(model: string, body: Body): unknown {
  const inputs = Array.isArray(body.input) && typeof body.input[0] !== 'number' ? body.input.length : 1;
  const embedding = body.encoding_format === 'float' ? FLOAT_VECTOR : BASE64_VECTOR;
  const data = Array.from({ length: inputs }, (_, index) => ({ object: 'embedding', index, embedding }));
  return { object: 'list', data, model, usage: { prompt_tokens: INPUT_TOKENS * inputs, total_tokens: INPUT_TOKENS * inputs } };
}

const FORMATS: Record<string, Format> = { '/v1/chat/completions': chatCompletions, '/v1/messages': messages, '/v1/responses': responses };

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Writes the stream, one event per write; stops early if the client leaves. */
async function sendStream(res: ServerResponse, events: { opening: string[]; delta: string; closing(deltas: number): string[] }): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  for (const opening of events.opening) res.write(opening);
  // A held stream, once let go, ends at once: it is there to be open, not to be relayed.
  const deltas = hold ? 1 : streamEvents;
  if (hold) await new Promise<void>((resolve) => held.add(resolve));
  else await new Promise((resolve) => setTimeout(resolve, FIRST_TOKEN_MS));
  for (let index = 0; index < deltas && !res.destroyed; index++) {
    res.write(events.delta);
    await nextTurn();
  }
  for (const closing of events.closing(deltas)) res.write(closing);
  res.end();
}

async function configure(req: IncomingMessage, res: ServerResponse): Promise<void> {
  hold = (JSON.parse(await text(req)) as { hold?: unknown }).hold === true;
  if (!hold) {
    for (const release of held) release();
    held.clear();
  }
  res.writeHead(204).end();
}

async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const format = req.method === 'POST' ? FORMATS[req.url ?? ''] : undefined;
  const embedding = req.method === 'POST' && req.url === '/v1/embeddings';
  if (req.method === 'PUT' && req.url === '/mock') return configure(req, res);
  if (req.url === '/healthz') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    return;
  }
  if (format === undefined && !embedding) {
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
    return;
  }
  const body = JSON.parse(await text(req)) as Body;
  const model = typeof body.model === 'string' ? body.model : 'unknown';
  if (format !== undefined && body.stream === true) return sendStream(res, format.stream(model, body));
  const json = JSON.stringify(format === undefined ? embeddings(model, body) : format.answer(model));
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) }).end(json);
}

const server = createServer((req, res) => {
  answer(req, res).catch((err: unknown) => {
    if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: String(err) } }));
    else res.destroy();
  });
});
// Thousands of streams held open at once, and clients that keep their connections.
server.maxConnections = 100_000;
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1');
process.once('SIGTERM', () => {
  for (const release of held) release();
  server.close(() => process.exit(0));
  server.closeIdleConnections();
});
