import { createHash } from 'node:crypto';
import type { ProviderConfig } from '../catalog.js';
import { isObject, mapChatContentParts, mapMessagesContentBlocks, type JsonObject } from '../content.js';
import type { Provider, ProviderRequest } from '../provider.js';

/** A document as the echo provider saw it. */
interface ReceivedDocument {
  name: string;
  bytes: number;
  pages: number;
}

interface Received {
  model: string;
  messageCount: number;
  lastUserText: string;
  documents: ReceivedDocument[];
}

/**
 * The number of page objects (`/Type /Page`, not `/Pages`) in a PDF. Enough to describe a
 * document; pages hidden inside compressed object streams are not seen.
 * @example countPdfPages(await readFile('report.pdf'))
 */
export function countPdfPages(pdf: Buffer): number {
  return pdf.toString('latin1').match(/\/Type\s*\/Page(?![A-Za-z])/g)?.length ?? 0;
}

function describeDocument(name: string, base64: string): ReceivedDocument {
  const bytes = Buffer.from(base64, 'base64');
  return { name, bytes: bytes.length, pages: countPdfPages(bytes) };
}

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? '' : 's'}`;
const words = (text: string) => text.split(/\s+/).filter(Boolean).length;
const inputWords = (messages: unknown[]) =>
  messages.reduce<number>((sum, message) => sum + (isObject(message) ? words(textOf(message.content)) : 0), 0);

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((part): part is JsonObject => isObject(part) && part.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text)
    .join('\n');
}

function lastUserText(messages: unknown[]): string {
  const last = messages.findLast((message) => isObject(message) && message.role === 'user');
  return isObject(last) ? textOf(last.content) : '';
}

/** What a Chat Completions body holds; attached PDFs are `file` parts with a data URL. */
function receivedChat(body: JsonObject, messages: unknown[]): Received {
  const documents: ReceivedDocument[] = [];
  mapChatContentParts(body, (part) => {
    if (isObject(part) && part.type === 'file' && isObject(part.file) && typeof part.file.file_data === 'string') {
      const name = typeof part.file.filename === 'string' ? part.file.filename : 'unnamed';
      documents.push(describeDocument(name, part.file.file_data.slice(part.file.file_data.indexOf(',') + 1)));
    }
    return part;
  });
  return { model: String(body.model), messageCount: messages.length, lastUserText: lastUserText(messages), documents };
}

/** What a Messages body holds; attached PDFs are `document` blocks with a base64 source. */
function receivedMessages(body: JsonObject, messages: unknown[]): Received {
  const documents: ReceivedDocument[] = [];
  mapMessagesContentBlocks(body, (block) => {
    if (isObject(block) && block.type === 'document' && isObject(block.source) && block.source.type === 'base64') {
      const name = typeof block.title === 'string' ? block.title : 'untitled';
      documents.push(describeDocument(name, String(block.source.data)));
    }
    return block;
  });
  return { model: String(body.model), messageCount: messages.length, lastUserText: lastUserText(messages), documents };
}

/** The answer, one line per fact, so that it streams as several deltas. */
function answerLines(received: Received): string[] {
  const lines = [`Echo from ${received.model}: received ${plural(received.messageCount, 'message')}.`];
  lines.push(received.lastUserText === '' ? 'The last user message has no text.' : `The last user message says: ${JSON.stringify(received.lastUserText)}`);
  if (received.documents.length === 0) lines.push('No documents are attached.');
  received.documents.forEach((document, index) => {
    lines.push(`Document ${index + 1}: ${document.name}, ${plural(document.bytes, 'byte')}, ${plural(document.pages, 'page')}.`);
  });
  return lines.map((line, index) => (index < lines.length - 1 ? `${line}\n` : line));
}

const sse = (data: unknown, event?: string) => `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`;

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

/** Server-sent events, one chunk per event, so the client sees them arrive one by one. */
function eventStream(events: string[], signal: AbortSignal): Response {
  const encoder = new TextEncoder();
  let next = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (signal.aborted) return controller.error(signal.reason);
      const event = events[next++];
      if (event === undefined) controller.close();
      else controller.enqueue(encoder.encode(event));
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8' } });
}

// The same request gets the same id, so answers are reproducible.
const digest = (body: JsonObject) => createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 24);

function chatCompletion({ body, signal }: ProviderRequest): Response {
  if (!Array.isArray(body.messages)) {
    return json(400, { error: { message: "'messages' must be an array", type: 'invalid_request_error', param: 'messages', code: null } });
  }
  const lines = answerLines(receivedChat(body, body.messages));
  const text = lines.join('');
  const id = `chatcmpl-echo${digest(body)}`;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model;
  const usage = { prompt_tokens: inputWords(body.messages), completion_tokens: words(text) };
  const fullUsage = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
  if (body.stream !== true) {
    return json(200, {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: text, refusal: null }, logprobs: null, finish_reason: 'stop' }],
      usage: fullUsage,
    });
  }
  const chunk = (delta: JsonObject, finishReason: string | null) =>
    sse({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] });
  const includeUsage = isObject(body.stream_options) && body.stream_options.include_usage === true;
  const events = [
    chunk({ role: 'assistant', content: '' }, null),
    ...lines.map((line) => chunk({ content: line }, null)),
    chunk({}, 'stop'),
    ...(includeUsage ? [sse({ id, object: 'chat.completion.chunk', created, model, choices: [], usage: fullUsage })] : []),
    'data: [DONE]\n\n',
  ];
  return eventStream(events, signal);
}

function message({ body, signal }: ProviderRequest): Response {
  if (!Array.isArray(body.messages)) {
    return json(400, { type: 'error', error: { type: 'invalid_request_error', message: 'messages: Field required' } });
  }
  const lines = answerLines(receivedMessages(body, body.messages));
  const text = lines.join('');
  const id = `msg_echo${digest(body)}`;
  const model = body.model;
  const inputTokens = inputWords(body.messages);
  if (body.stream !== true) {
    return json(200, {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: inputTokens, output_tokens: words(text) },
    });
  }
  const start = { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: inputTokens, output_tokens: 0 } };
  const events = [
    sse({ type: 'message_start', message: start }, 'message_start'),
    sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
    ...lines.map((line) => sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: line } }, 'content_block_delta')),
    sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
    sse({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: words(text) } }, 'message_delta'),
    sse({ type: 'message_stop' }, 'message_stop'),
  ];
  return eventStream(events, signal);
}

/**
 * An offline provider for both endpoints: it answers, deterministically and in the endpoint's own
 * format (streaming too), with what it received: the message count, the last user message and
 * each attached document's name, size and page count. Token counts are word counts.
 * @example echoProvider({ id: 'local' })
 */
export function echoProvider(config: Pick<ProviderConfig, 'id'>): Provider {
  return {
    id: config.id,
    chatCompletions: async (request) => chatCompletion(request),
    messages: async (request) => message(request),
  };
}
