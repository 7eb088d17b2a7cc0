import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { listen } from './http.js';

/** A complete Anthropic Messages answer saying `text`, as the upstream sends it. */
export function anthropicMessage(text: string) {
  return {
    id: 'msg_upstream',
    type: 'message',
    role: 'assistant',
    model: 'claude-sonnet-4-5-20250929',
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 4 },
  };
}

/** A request a `scriptedUpstream()` received: its path, headers and body (parsed: JSON, or a form's fields). */
export interface UpstreamRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** How a scripted upstream answers one request. */
export type UpstreamAnswer = (res: ServerResponse, request: UpstreamRequest) => void;

/** An answer of `status` with `body` (JSON, or a string as it is) and `headers`. */
export function reply(status: number, body: unknown, headers: Record<string, string> = {}): UpstreamAnswer {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return (res) => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(text);
}

/**
 * A 200 event stream of what `events` gives, as it gives it; when `events` fails, the connection
 * is dropped mid-answer, as an upstream that breaks down.
 */
export function replyEvents(events: Readable): UpstreamAnswer {
  return (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    events.on('error', () => res.destroy());
    events.pipe(res);
  };
}

/** What `scriptedUpstream()` resolves to. */
export type ScriptedUpstream = Awaited<ReturnType<typeof scriptedUpstream>>;

/**
 * A real upstream on a loopback port, answering as each test scripts it: `answer(path, how)`
 * answers the next request to `path` with `how` (answers for one path are used in order);
 * `answerEvery(path, how)` answers every request to `path` that no `answer()` is left for.
 * `received` holds every request; one that nothing was scripted for is answered 501.
 */
export async function scriptedUpstream() {
  const scripted = new Map<string, UpstreamAnswer[]>();
  const standing = new Map<string, UpstreamAnswer>();
  const received: UpstreamRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      // An OAuth token endpoint is sent a form.
      const form = req.headers['content-type']?.startsWith('application/x-www-form-urlencoded') === true;
      const body = form ? Object.fromEntries(new URLSearchParams(text)) : (JSON.parse(text || '{}') as Record<string, unknown>);
      const request = { path: req.url ?? '', headers: req.headers, body };
      received.push(request);
      const how = scripted.get(request.path)?.shift() ?? standing.get(request.path);
      if (how) how(res, request);
      else res.writeHead(501, { 'content-type': 'application/json' }).end('{"error":{"message":"nothing scripted"}}');
    });
  });
  const { url, close } = await listen(server);
  return {
    url,
    received,
    answer(path: string, how: UpstreamAnswer, times = 1) {
      const queue = scripted.get(path) ?? [];
      for (let index = 0; index < times; index++) queue.push(how);
      scripted.set(path, queue);
    },
    answerEvery(path: string, how: UpstreamAnswer) {
      standing.set(path, how);
    },
    /** Answers scripted and not used yet. */
    get pending() {
      return [...scripted.values()].reduce((sum, queue) => sum + queue.length, 0);
    },
    close,
  };
}

/**
 * A real upstream on a loopback port that answers every request with an event stream it never
 * ends by itself: `requests` resolves each request as it arrives, so a test can write events and
 * see when the gateway closes the connection.
 */
export async function streamingUpstream() {
  const arrivals: Array<{ req: IncomingMessage; res: ServerResponse }> = [];
  const waiting: Array<(arrival: { req: IncomingMessage; res: ServerResponse }) => void> = [];
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    const arrival = { req, res };
    const waiter = waiting.shift();
    if (waiter) waiter(arrival);
    else arrivals.push(arrival);
  });
  const { url, close } = await listen(server);
  return {
    url,
    /** The next request the upstream receives. */
    next: () =>
      new Promise<{ req: IncomingMessage; res: ServerResponse }>((resolve) => {
        const arrival = arrivals.shift();
        if (arrival) resolve(arrival);
        else waiting.push(resolve);
      }),
    close,
  };
}

/** One request a `mockProviders()` upstream received, and the usage its answer reported. */
export interface MockCall {
  path: string;
  body: Record<string, unknown>;
  /** Input tokens (for Messages, cache writes and reads included) and output tokens. */
  usage: { input: number; output: number };
}

const event = (data: unknown, name?: string) => `${name === undefined ? '' : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`;

function openAIAnswer(res: ServerResponse, body: Record<string, unknown>, usage: MockCall['usage']): void {
  const base = { id: 'chatcmpl-mock', created: 1_744_000_000, model: body.model };
  const reported = { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output };
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        ...base,
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' }, finish_reason: 'stop' }],
        usage: reported,
      }),
    );
    return;
  }
  // As OpenAI streams: with include_usage, `usage: null` on every chunk and one more chunk with the usage.
  const options = body.stream_options as { include_usage?: boolean } | undefined;
  const withUsage = options?.include_usage === true;
  const chunk = (delta: unknown, finish: string | null) => ({
    ...base,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...(withUsage && { usage: null }),
  });
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(event(chunk({ role: 'assistant', content: '' }, null)));
  res.write(event(chunk({ content: 'Hello' }, null)));
  res.write(event(chunk({ content: ' there' }, 'stop')));
  if (withUsage) res.write(event({ ...base, object: 'chat.completion.chunk', choices: [], usage: reported }));
  res.end('data: [DONE]\n\n');
}

function anthropicAnswer(res: ServerResponse, body: Record<string, unknown>, usage: MockCall['usage']): void {
  // Part of the input as cache reads and writes, which count as input too.
  const input = { input_tokens: usage.input - 3, cache_creation_input_tokens: 1, cache_read_input_tokens: 2 };
  const message = { id: 'msg_mock', type: 'message', role: 'assistant', model: body.model, stop_sequence: null };
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        ...message,
        content: [{ type: 'text', text: 'Hello there' }],
        stop_reason: 'end_turn',
        usage: { ...input, output_tokens: usage.output },
      }),
    );
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(event({ type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...input, output_tokens: 1 } } }, 'message_start'));
  res.write(event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'));
  res.write(event({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello there' } }, 'content_block_delta'));
  res.write(event({ type: 'content_block_stop', index: 0 }, 'content_block_stop'));
  res.write(event({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: usage.output } }, 'message_delta'));
  res.end(event({ type: 'message_stop' }, 'message_stop'));
}

function responsesAnswer(res: ServerResponse, body: Record<string, unknown>, usage: MockCall['usage']): void {
  const response = (status: string, reported: unknown) => ({
    id: 'resp_mock',
    object: 'response',
    created_at: 1_744_000_000,
    status,
    model: body.model,
    output: [],
    usage: reported,
  });
  const reported = { input_tokens: usage.input, output_tokens: usage.output, total_tokens: usage.input + usage.output };
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(response('completed', reported)));
    return;
  }
  // As OpenAI streams: the response object in the response.* events, its usage in the last one.
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(event({ type: 'response.created', sequence_number: 0, response: response('in_progress', null) }, 'response.created'));
  res.write(event({ type: 'response.in_progress', sequence_number: 1, response: response('in_progress', null) }, 'response.in_progress'));
  res.write(
    event(
      { type: 'response.output_text.delta', sequence_number: 2, item_id: 'msg_mock', output_index: 0, content_index: 0, delta: 'Hello there' },
      'response.output_text.delta',
    ),
  );
  res.end(event({ type: 'response.completed', sequence_number: 3, response: response('completed', reported) }, 'response.completed'));
}

/** What `mockProviders()` resolves to. */
export type MockProviders = Awaited<ReturnType<typeof mockProviders>>;

/**
 * OpenAI's and Anthropic's APIs on a loopback port, as their providers reach them:
 * `POST /v1/chat/completions` and `POST /v1/responses` (an `openAIProvider` with baseURL
 * `${url}/v1`), `POST /v1/messages` and `POST /v1/messages/count_tokens` (an `anthropicProvider`
 * with baseURL `url`), JSON or streamed as the real ones answer, naming the
 * model they were asked for. Each answer reports a usage of its own, different from call to call;
 * `calls` holds every request with the usage its answer reported.
 */
export async function mockProviders() {
  const calls: MockCall[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      const usage = { input: 11 + calls.length, output: 4 + (calls.length % 5) };
      const path = req.url ?? '';
      calls.push({ path, body, usage });
      if (path === '/v1/chat/completions') openAIAnswer(res, body, usage);
      else if (path === '/v1/responses') responsesAnswer(res, body, usage);
      else if (path === '/v1/messages') anthropicAnswer(res, body, usage);
      else if (path === '/v1/messages/count_tokens')
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ input_tokens: usage.input }));
      else res.writeHead(404).end();
    });
  });
  const { url, close } = await listen(server);
  return {
    url,
    calls,
    close,
  };
}
