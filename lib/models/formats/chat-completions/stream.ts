import { isObject, type JsonObject } from '../../content.js';
import { upstreamStreamFailure } from '../../answer.js';
import { sse, type FinishReason, type StreamPart, type StreamReader, type StreamWriter, type Usage } from '../neutral.js';
import { readChatUsage, writeChatUsage } from './answer.js';
import { FROM_CHAT_FINISH, TO_CHAT_FINISH } from './finish-reasons.js';

/**
 * Reads a Chat Completions stream. Chunks carry no block boundaries: a text block opens with the
 * first non-empty `content`; a tool call opens with the delta that gives its `id` at a new
 * `index`, closing the block before it (OpenAI streams parallel calls one after the other), and
 * its later deltas name only that index (one arriving after the next call opened still counts
 * for its own). Whatever is open closes at the finish, which waits for the usage chunk that
 * follows it (the call asked for one), or for the stream's end.
 */
export class ChatStreamReader implements StreamReader {
  #started = false;
  #textOpen = false;
  /** Tool call ids by their `index`. */
  readonly #calls = new Map<number, string>();
  /** The tool call open last, until the next opens or the finish. */
  #openCall: string | undefined;
  #finish: FinishReason | undefined;
  #usage: Usage = { inputTokens: 0, outputTokens: 0 };

  read(_name: string | undefined, data: unknown): StreamPart[] {
    if (!isObject(data)) return [];
    if (isObject(data.error)) throw upstreamStreamFailure(data.error);
    const parts: StreamPart[] = [];
    if (!this.#started) {
      this.#started = true;
      parts.push({
        type: 'start',
        id: typeof data.id === 'string' ? data.id : '',
        model: typeof data.model === 'string' ? data.model : '',
        created: typeof data.created === 'number' ? data.created : Math.floor(Date.now() / 1000),
      });
    }
    if (isObject(data.usage)) this.#usage = readChatUsage(data.usage);
    const choice = Array.isArray(data.choices) && isObject(data.choices[0]) ? data.choices[0] : undefined;
    const delta = choice && isObject(choice.delta) ? choice.delta : {};
    for (const text of [delta.content, delta.refusal]) {
      if (typeof text !== 'string' || text === '') continue;
      if (!this.#textOpen) {
        this.#textOpen = true;
        parts.push({ type: 'text-start' });
      }
      parts.push({ type: 'text-delta', delta: text });
    }
    if (typeof delta.refusal === 'string' && delta.refusal !== '') this.#finish = 'refusal';
    if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) this.#toolCall(call, parts);
    if (choice && typeof choice.finish_reason === 'string') {
      this.#closeAll(parts);
      this.#finish ??= FROM_CHAT_FINISH[choice.finish_reason] ?? 'other';
    }
    return parts;
  }

  #toolCall(call: unknown, parts: StreamPart[]): void {
    if (!isObject(call)) return;
    const index = typeof call.index === 'number' ? call.index : 0;
    const fn = isObject(call.function) ? call.function : {};
    if (typeof call.id === 'string' && call.id !== '' && this.#calls.get(index) !== call.id) {
      this.#closeAll(parts);
      this.#calls.set(index, call.id);
      this.#openCall = call.id;
      parts.push({ type: 'tool-call-start', id: call.id, name: typeof fn.name === 'string' ? fn.name : '' });
    }
    const id = this.#calls.get(index);
    if (id !== undefined && typeof fn.arguments === 'string' && fn.arguments !== '') parts.push({ type: 'tool-call-delta', id, delta: fn.arguments });
  }

  #closeAll(parts: StreamPart[]): void {
    if (this.#textOpen) parts.push({ type: 'text-end' });
    this.#textOpen = false;
    if (this.#openCall !== undefined) parts.push({ type: 'tool-call-end', id: this.#openCall });
    this.#openCall = undefined;
  }

  end(): StreamPart[] {
    if (this.#finish === undefined) return [];
    return [{ type: 'finish', finishReason: this.#finish, usage: this.#usage }];
  }
}

/**
 * Writes a Chat Completions stream: a first chunk with the role, one chunk per text or argument
 * delta (tool calls numbered by `index` in the order they started), a chunk with the finish
 * reason, then the usage chunk (`choices: []`), which the gateway withholds from a client that did
 * not ask for it, as it does for an upstream's; `data: [DONE]` last.
 */
export class ChatStreamWriter implements StreamWriter {
  #head: JsonObject = {};
  readonly #indexes = new Map<string, number>();

  #chunk(delta: JsonObject, finishReason: string | null = null): string {
    return sse({ ...this.#head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] });
  }

  write(part: StreamPart): string {
    switch (part.type) {
      case 'start':
        this.#head = { id: part.id, object: 'chat.completion.chunk', created: part.created, model: part.model };
        return this.#chunk({ role: 'assistant', content: '', refusal: null });
      case 'text-delta':
        return this.#chunk({ content: part.delta });
      case 'tool-call-start': {
        const index = this.#indexes.size;
        this.#indexes.set(part.id, index);
        return this.#chunk({ tool_calls: [{ index, id: part.id, type: 'function', function: { name: part.name, arguments: '' } }] });
      }
      case 'tool-call-delta':
        return this.#chunk({ tool_calls: [{ index: this.#indexes.get(part.id) ?? 0, function: { arguments: part.delta } }] });
      case 'finish':
        return this.#chunk({}, TO_CHAT_FINISH[part.finishReason]) + sse({ ...this.#head, choices: [], usage: writeChatUsage(part.usage) });
      default:
        // Block boundaries have no chunk of their own; reasoning is never asked for by this format.
        return '';
    }
  }

  end(): string {
    return 'data: [DONE]\n\n';
  }
}
