import { isObject, type JsonObject } from '../../content.js';
import type { Answer, StreamPart, Usage } from '../../formats/neutral.js';
import { readConverseUsage, readStop } from './converse.js';

type Open = { kind: 'text' } | { kind: 'reasoning' } | { kind: 'tool'; id: string };

/**
 * Reads one ConverseStream answer: each event (its `:event-type` and JSON payload) into neutral
 * parts. Blocks are told apart by `contentBlockIndex`: a tool use opens with `contentBlockStart`,
 * text and reasoning with their first delta; `contentBlockStop` closes one. The finish waits for
 * the usage, which `metadata` brings after `messageStop`.
 */
export class ConverseStreamReader {
  readonly #id: string;
  readonly #model: string;
  readonly #open = new Map<number, Open>();
  #stop: Pick<Answer, 'finishReason' | 'stopSequence'> | undefined;
  #usage: Usage | undefined;
  #done = false;

  constructor(id: string, model: string) {
    this.#id = id;
    this.#model = model;
  }

  read(eventType: string, payload: JsonObject): StreamPart[] {
    switch (eventType) {
      case 'messageStart':
        return [{ type: 'start', id: this.#id, model: this.#model, created: Math.floor(Date.now() / 1000) }];
      case 'contentBlockStart': {
        const start = isObject(payload.start) ? payload.start : {};
        if (!isObject(start.toolUse)) return [];
        const id = String(start.toolUse.toolUseId ?? '');
        this.#open.set(index(payload), { kind: 'tool', id });
        return [{ type: 'tool-call-start', id, name: String(start.toolUse.name ?? '') }];
      }
      case 'contentBlockDelta':
        return this.#delta(index(payload), isObject(payload.delta) ? payload.delta : {});
      case 'contentBlockStop':
        return this.#close(index(payload));
      case 'messageStop':
        this.#stop = readStop(payload.stopReason, payload.additionalModelResponseFields);
        return this.#finish();
      case 'metadata':
        this.#usage = readConverseUsage(payload.usage);
        return this.#finish();
      default:
        return [];
    }
  }

  /** What the stream's end completes: a stop whose usage never came finishes with none counted. */
  end(): StreamPart[] {
    if (this.#stop === undefined || this.#done) return [];
    this.#usage ??= { inputTokens: 0, outputTokens: 0 };
    return this.#finish();
  }

  /** Whether the answer has finished. */
  get finished(): boolean {
    return this.#done;
  }

  #delta(at: number, delta: JsonObject): StreamPart[] {
    const open = this.#open.get(at);
    if (typeof delta.text === 'string') {
      const parts = this.#opening(at, open, 'text');
      return [...parts, { type: 'text-delta', delta: delta.text }];
    }
    if (isObject(delta.toolUse)) {
      if (open?.kind !== 'tool') return [];
      return [{ type: 'tool-call-delta', id: open.id, delta: String(delta.toolUse.input ?? '') }];
    }
    const reasoning = delta.reasoningContent;
    if (!isObject(reasoning)) return [];
    if (typeof reasoning.redactedContent === 'string') {
      if (open !== undefined) return [];
      this.#open.set(at, { kind: 'reasoning' });
      return [{ type: 'reasoning-start', redacted: reasoning.redactedContent }];
    }
    const parts = this.#opening(at, open, 'reasoning');
    if (typeof reasoning.text === 'string') parts.push({ type: 'reasoning-delta', delta: reasoning.text });
    if (typeof reasoning.signature === 'string') parts.push({ type: 'reasoning-signature', signature: reasoning.signature });
    return parts;
  }

  /** The start of a text or reasoning block at `at`, unless it is open already. */
  #opening(at: number, open: Open | undefined, kind: 'text' | 'reasoning'): StreamPart[] {
    if (open?.kind === kind) return [];
    const parts = this.#close(at);
    this.#open.set(at, { kind });
    parts.push({ type: kind === 'text' ? 'text-start' : 'reasoning-start' });
    return parts;
  }

  #close(at: number): StreamPart[] {
    const open = this.#open.get(at);
    if (open === undefined) return [];
    this.#open.delete(at);
    if (open.kind === 'tool') return [{ type: 'tool-call-end', id: open.id }];
    return [{ type: open.kind === 'text' ? 'text-end' : 'reasoning-end' }];
  }

  #finish(): StreamPart[] {
    if (this.#stop === undefined || this.#usage === undefined || this.#done) return [];
    this.#done = true;
    const parts = [...this.#open.keys()].flatMap((at) => this.#close(at));
    return [...parts, { type: 'finish', ...this.#stop, usage: this.#usage }];
  }
}

function index(payload: JsonObject): number {
  return typeof payload.contentBlockIndex === 'number' ? payload.contentBlockIndex : 0;
}
