import { isObject, type JsonObject } from '../../content.js';
import { unreadableStreamEvent, upstreamStreamFailure } from '../../answer.js';
import { sse, type FinishReason, type Part, type StreamPart, type StreamReader, type StreamWriter, type Usage } from '../neutral.js';
import { readChatUsage, thinkingFields, writeChatUsage } from './answer.js';
import { FROM_CHAT_FINISH, TO_CHAT_FINISH } from './finish-reasons.js';

/** True when `text` is one whole JSON value: a call's arguments that no later piece continues. */
function isWholeJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Reads a Chat Completions stream. Chunks carry no block boundaries: a text block opens with the
 * first non-empty `content`; a tool call opens with the delta that gives its `id` at a new
 * `index`, closing the text before it and each call before it whose arguments are whole, and its
 * later deltas name only that index. OpenAI streams parallel calls one after the other; a
 * compatible server may interleave their arguments, and a call still in pieces when the next
 * opens stays open for the rest of its own. Whatever is open closes at the finish, which waits
 * for the usage chunk that follows it (the call asked for one), or for the stream's end.
 */
export class ChatStreamReader implements StreamReader {
  #started = false;
  #textOpen = false;
  /** Whether the open text is the model's refusal (`delta.refusal`). */
  #refusalOpen = false;
  /** Tool call ids by their `index`. */
  readonly #calls = new Map<number, string>();
  /** The tool calls open, in the order they opened, with their arguments so far. */
  readonly #openCalls = new Map<string, string>();
  #finish: FinishReason | undefined;
  #usage: Usage = { inputTokens: 0, outputTokens: 0 };

  read(_name: string | undefined, data: unknown): StreamPart[] {
    if (!isObject(data)) return [];
    if (isObject(data.error)) throw upstreamStreamFailure(data.error);
    if (!Array.isArray(data.choices)) throw unreadableStreamEvent('a chunk without choices');
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
    for (const [text, refusal] of [
      [delta.content, false],
      [delta.refusal, true],
    ] as const) {
      if (typeof text !== 'string' || text === '') continue;
      if (this.#textOpen && this.#refusalOpen !== refusal) this.#closeText(parts);
      if (!this.#textOpen) {
        this.#textOpen = true;
        this.#refusalOpen = refusal;
        parts.push(refusal ? { type: 'text-start', refusal } : { type: 'text-start' });
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
    const previous = this.#calls.get(index);
    if (typeof call.id === 'string' && call.id !== '' && previous !== call.id) {
      this.#closeText(parts);
      // The calls before it end here when their arguments are whole (OpenAI's, one after the
      // other) or another takes their index; one still in pieces stays open for the rest.
      for (const [id, args] of this.#openCalls) {
        if (id === previous || isWholeJson(args)) {
          this.#openCalls.delete(id);
          parts.push({ type: 'tool-call-end', id });
        }
      }
      this.#calls.set(index, call.id);
      this.#openCalls.set(call.id, '');
      parts.push({ type: 'tool-call-start', id: call.id, name: typeof fn.name === 'string' ? fn.name : '' });
    }
    const id = this.#calls.get(index);
    if (id === undefined || typeof fn.arguments !== 'string' || fn.arguments === '') return;
    const args = this.#openCalls.get(id);
    if (args !== undefined) this.#openCalls.set(id, args + fn.arguments);
    parts.push({ type: 'tool-call-delta', id, delta: fn.arguments });
  }

  #closeText(parts: StreamPart[]): void {
    if (this.#textOpen) parts.push({ type: 'text-end' });
    this.#textOpen = false;
  }

  #closeAll(parts: StreamPart[]): void {
    this.#closeText(parts);
    for (const id of this.#openCalls.keys()) parts.push({ type: 'tool-call-end', id });
    this.#openCalls.clear();
  }

  end(): StreamPart[] {
    if (this.#finish === undefined) return [];
    return [{ type: 'finish', finishReason: this.#finish, usage: this.#usage }];
  }
}

/**
 * Writes a Chat Completions stream: a first chunk with the role, one chunk per text or argument
 * delta (a refusal's text in `delta.refusal`; tool calls numbered by `index` in the order they
 * started), a chunk with the finish reason, then the usage chunk (`choices: []`), which the
 * gateway withholds from a client that did not ask for it, as it does for an upstream's;
 * `data: [DONE]` last.
 */
export class ChatStreamWriter implements StreamWriter {
  #head: JsonObject = {};
  readonly #indexes = new Map<string, number>();
  /** Whether the open text is a refusal: its deltas go in `delta.refusal`. */
  #refusal = false;
  /** The thinking so far, as `thinkingFields()` writes it once each block has ended. */
  readonly #thinking: Part[] = [];

  #chunk(delta: JsonObject, finishReason: string | null = null): string {
    return sse({ ...this.#head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] });
  }

  write(part: StreamPart): string {
    switch (part.type) {
      case 'start':
        this.#head = { id: part.id, object: 'chat.completion.chunk', created: part.created, model: part.model };
        return this.#chunk({ role: 'assistant', content: '', refusal: null });
      case 'text-start':
        this.#refusal = part.refusal === true;
        return '';
      case 'text-delta':
        return this.#chunk(this.#refusal ? { refusal: part.delta } : { content: part.delta });
      case 'tool-call-start': {
        const index = this.#indexes.size;
        this.#indexes.set(part.id, index);
        return this.#chunk({ tool_calls: [{ index, id: part.id, type: 'function', function: { name: part.name, arguments: '' } }] });
      }
      case 'tool-call-delta':
        return this.#chunk({ tool_calls: [{ index: this.#indexes.get(part.id) ?? 0, function: { arguments: part.delta } }] });
      case 'reasoning-start':
        this.#thinking.push(part.redacted === undefined ? { type: 'reasoning', text: '' } : { type: 'redacted-reasoning', data: part.redacted });
        return '';
      case 'reasoning-delta': {
        const open = this.#thinking.at(-1);
        if (open?.type === 'reasoning') open.text += part.delta;
        return this.#chunk({ reasoning_content: part.delta });
      }
      case 'reasoning-signature': {
        const open = this.#thinking.at(-1);
        if (open?.type === 'reasoning') open.signature = part.signature;
        return '';
      }
      case 'reasoning-end':
        // Every block so far, whole: the openai SDK keeps the last value of a field it does not know.
        return this.#chunk({ thinking_blocks: thinkingFields(this.#thinking).thinking_blocks });
      case 'finish':
        return this.#chunk({}, TO_CHAT_FINISH[part.finishReason]) + sse({ ...this.#head, choices: [], usage: writeChatUsage(part.usage) });
      default:
        // Block boundaries have no chunk of their own.
        return '';
    }
  }

  end(): string {
    return 'data: [DONE]\n\n';
  }
}
