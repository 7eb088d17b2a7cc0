import { EventSplitter, eventFields } from '../../http/server-sent-events.js';
import { randomAlphanumeric } from '../../random.js';
import { eventObject } from '../answer.js';
import type { JsonObject } from '../content.js';
import type { Answer, Part, Request, StreamPart, StreamReader } from '../formats/neutral.js';
import { readNeutral } from '../formats/translate.js';
import { isTranslated, TRANSLATIONS as FORMATS, type FormatEndpoint } from '../formats/registry.js';
import type { WireFormat } from '../formats/wire-format.js';
import type { ProviderEndpoint } from '../provider.js';
import type { TokenUsage } from '../../usage/token-usage.js';

/** The formats whose answers are cached: those the neutral representation reads and writes (no token count, no embeddings). */
export type CachedEndpoint = FormatEndpoint;

/** How each format's answer ids begin: a replay gets a fresh one. */
const ID_PREFIX: Readonly<Record<CachedEndpoint, string>> = { chatCompletions: 'chatcmpl-', responses: 'resp_', messages: 'msg_' };

/**
 * The formats whose written answer an entry keeps: those whose one generated id is the answer's.
 * A Responses answer's items have ids of their own, fresh on every replay: it is written again each time.
 */
export const KEEPS_WRITTEN: Readonly<Record<CachedEndpoint, boolean>> = { chatCompletions: true, responses: false, messages: true };

/**
 * What one cache entry holds: the answer as the neutral stream parts it was made of (text in the
 * pieces it came in, tool calls with their argument pieces, reasoning, the finish), from which
 * both a JSON answer and a stream of the client's format are written; when it was stored, and what
 * the call cost, which a hit saves.
 */
export interface CachedAnswer {
  /** Unix ms at which it was stored. */
  storedAt: number;
  /** Unix seconds of the original answer's `created`. */
  created: number;
  /** Every part after the `start`, the `finish` last, its usage the original's. */
  parts: StreamPart[];
  /** The original call's cost, in picodollars. */
  costPicoUsd: number;
  /** The answer as it was written to the call that stored it, for a hit that asks the same to be sent as it is. */
  written?: WrittenAnswer;
}

/** An answer as the client was sent it (JSON or the stream's events), cut at its id. */
export interface WrittenAnswer {
  /** `cacheVariant()` of the call it was written for: a hit of the same variant is sent these bytes. */
  variant: string;
  /** The text around each place of the answer's id: a hit joins them with a fresh one. */
  pieces: string[];
}

/**
 * An entry as a store keeps it: all but its parts on the first line, the parts on the second
 * (JSON has no raw line break), so that a hit sent the written answer never reads the parts.
 */
export function entryText({ parts, ...head }: CachedAnswer): string {
  return `${JSON.stringify(head)}\n${JSON.stringify(parts)}`;
}

/** The entry `entryText()` wrote; its parts are read when first asked for. */
export function readEntry(text: string): CachedAnswer {
  const cut = text.indexOf('\n');
  if (cut < 0) throw new Error('koa-model-gateway: a cache entry has no parts');
  return new StoredAnswer(JSON.parse(text.slice(0, cut)) as Omit<CachedAnswer, 'parts'>, text, cut + 1);
}

/** An entry read from a store, its parts parsed from the store's text only when a hit needs them. */
class StoredAnswer implements CachedAnswer {
  readonly storedAt: number;
  readonly created: number;
  readonly costPicoUsd: number;
  readonly written?: WrittenAnswer;
  readonly #text: string;
  readonly #partsAt: number;
  #parts: StreamPart[] | undefined;

  constructor(head: Omit<CachedAnswer, 'parts'>, text: string, partsAt: number) {
    this.storedAt = head.storedAt;
    this.created = head.created;
    this.costPicoUsd = head.costPicoUsd;
    if (head.written !== undefined) this.written = head.written;
    this.#text = text;
    this.#partsAt = partsAt;
  }

  get parts(): StreamPart[] {
    return (this.#parts ??= JSON.parse(this.#text.slice(this.#partsAt)) as StreamPart[]);
  }
}

export const isCachedEndpoint = (endpoint: ProviderEndpoint): endpoint is CachedEndpoint => isTranslated(endpoint);

/**
 * The request in the neutral representation, which the writers of a replay need; undefined when
 * no reader takes it (a field the neutral representation cannot hold, such as
 * `previous_response_id` or `n`): such an answer could not be replayed whole, and is not cached.
 */
export const neutralRequest = (endpoint: CachedEndpoint, body: JsonObject): Request | undefined => readNeutral(endpoint, body);

/** The parts of a whole answer, one piece per block. */
function answerParts(answer: Answer): StreamPart[] {
  const parts: StreamPart[] = [];
  for (const part of answer.content) {
    switch (part.type) {
      case 'text':
        parts.push({ type: 'text-start' }, { type: 'text-delta', delta: part.text }, { type: 'text-end' });
        break;
      case 'tool-call':
        parts.push(
          { type: 'tool-call-start', id: part.id, name: part.name },
          { type: 'tool-call-delta', id: part.id, delta: part.input },
          { type: 'tool-call-end', id: part.id },
        );
        break;
      case 'reasoning':
        parts.push({ type: 'reasoning-start' }, { type: 'reasoning-delta', delta: part.text });
        if (part.signature !== undefined) parts.push({ type: 'reasoning-signature', signature: part.signature });
        parts.push({ type: 'reasoning-end' });
        break;
      case 'redacted-reasoning':
        parts.push({ type: 'reasoning-start', redacted: part.data }, { type: 'reasoning-end' });
        break;
      default:
        // An answer holds no images, files or tool results.
        break;
    }
  }
  parts.push({
    type: 'finish',
    finishReason: answer.finishReason,
    ...(answer.stopSequence !== undefined && { stopSequence: answer.stopSequence }),
    usage: answer.usage,
  });
  return parts;
}

/** The whole answer the parts make. */
function wholeAnswer(parts: readonly StreamPart[], id: string, model: string, created: number): Answer {
  const content: Part[] = [];
  const calls = new Map<string, Extract<Part, { type: 'tool-call' }>>();
  let text: Extract<Part, { type: 'text' }> | undefined;
  let reasoning: Extract<Part, { type: 'reasoning' }> | undefined;
  const answer: Answer = { id, model, content, finishReason: 'stop', usage: { inputTokens: 0, outputTokens: 0 }, created };
  for (const part of parts) {
    switch (part.type) {
      case 'text-start':
        text = { type: 'text', text: '' };
        content.push(text);
        break;
      case 'text-delta':
        if (text) text.text += part.delta;
        break;
      case 'reasoning-start':
        if (part.redacted !== undefined) {
          content.push({ type: 'redacted-reasoning', data: part.redacted });
          reasoning = undefined;
        } else {
          reasoning = { type: 'reasoning', text: '' };
          content.push(reasoning);
        }
        break;
      case 'reasoning-delta':
        if (reasoning) reasoning.text += part.delta;
        break;
      case 'reasoning-signature':
        if (reasoning) reasoning.signature = part.signature;
        break;
      case 'tool-call-start': {
        const call = { type: 'tool-call' as const, id: part.id, name: part.name, input: '' };
        calls.set(part.id, call);
        content.push(call);
        break;
      }
      case 'tool-call-delta': {
        const call = calls.get(part.id);
        if (call) call.input += part.delta;
        break;
      }
      case 'finish':
        answer.finishReason = part.finishReason;
        if (part.stopSequence !== undefined) answer.stopSequence = part.stopSequence;
        answer.usage = part.usage;
        break;
      default:
        break;
    }
  }
  return answer;
}

/**
 * Collects what a call's client is sent, in the client's own format, into the parts of an entry:
 * a JSON answer whole (`json`), or a stream event by event (`events`, then `end` once the whole
 * stream was sent). `parts()` is undefined unless the answer was seen to its finish.
 */
export class AnswerCollector {
  readonly #format: WireFormat;
  #reader: StreamReader | undefined;
  #splitter: EventSplitter | undefined;
  #parts: StreamPart[] = [];
  #created = Math.floor(Date.now() / 1000);
  #finished = false;

  constructor(endpoint: CachedEndpoint) {
    this.#format = FORMATS[endpoint];
  }

  json(body: string): void {
    const read = this.#format.provider?.readAnswer;
    const parsed = eventObject(body);
    if (read === undefined || parsed === undefined) return;
    const answer = read(parsed);
    this.#created = answer.created;
    this.#parts = answerParts(answer);
    this.#finished = true;
  }

  events(text: string): void {
    this.#reader ??= this.#format.provider?.streamReader();
    this.#splitter ??= new EventSplitter();
    for (const event of this.#splitter.push(text)) this.#read(event);
  }

  end(): void {
    if (this.#reader === undefined || this.#splitter === undefined) return;
    for (const event of this.#splitter.end()) this.#read(event);
    this.#take(this.#reader.end());
  }

  #read(event: string): void {
    const { name, data } = eventFields(event);
    const parsed = eventObject(data);
    if (parsed !== undefined && this.#reader !== undefined) this.#take(this.#reader.read(name, parsed));
  }

  #take(parts: StreamPart[]): void {
    for (const part of parts) {
      if (part.type === 'start') this.#created = part.created;
      else this.#parts.push(part);
      if (part.type === 'finish') this.#finished = true;
    }
  }

  /**
   * The entry's parts, the finish's usage the call's metered one (a client that did not ask for a
   * stream's usage was sent none); undefined when the answer never finished.
   */
  entry(usage: TokenUsage, costPicoUsd: number, storedAt: number): CachedAnswer | undefined {
    if (!this.#finished) return undefined;
    const parts = this.#parts.map((part) => (part.type === 'finish' ? { ...part, usage: { ...part.usage, ...usage } } : part));
    return { storedAt, created: this.#created, parts, costPicoUsd };
  }
}

// From the pooled CSPRNG bytes of request ids: a `randomBytes()` call of its own cost a hit ~10 µs.
export const freshId = (endpoint: CachedEndpoint) => `${ID_PREFIX[endpoint]}${randomAlphanumeric(24)}`;

/** An entry as the JSON answer of `endpoint`'s format, with `id` and `model` as its own. */
export function replayJson(endpoint: CachedEndpoint, cached: CachedAnswer, request: Request, model: string, id: string): JsonObject {
  return FORMATS[endpoint].client.writeAnswer(wholeAnswer(cached.parts, id, model, cached.created), request);
}

/** An entry as the events of `endpoint`'s stream, whole, with `id` and `model` as its own. */
export function replayEvents(endpoint: CachedEndpoint, cached: CachedAnswer, request: Request, model: string, id: string): string {
  const writer = FORMATS[endpoint].client.streamWriter(request);
  const finish = cached.parts.at(-1);
  const usage = finish?.type === 'finish' ? finish.usage : undefined;
  let out = writer.write({ type: 'start', id, model, created: cached.created, ...(usage && { usage: { ...usage, outputTokens: 0 } }) });
  for (const part of cached.parts) out += writer.write(part);
  return out + writer.end();
}
