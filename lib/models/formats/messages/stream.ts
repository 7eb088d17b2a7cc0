import { unreadableStreamEvent, upstreamStreamFailure } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import { sse, type FinishReason, type StreamPart, type StreamReader, type StreamWriter, type Usage } from '../neutral.js';
import { MESSAGE_UNKNOWNS, messageUsage, readMessagesUsage, writeMessagesUsage } from './answer.js';
import { FROM_MESSAGES_STOP, TO_MESSAGES_STOP } from './finish-reasons.js';

type Block = { kind: 'text' } | { kind: 'reasoning' } | { kind: 'tool'; id: string } | { kind: 'other' };

/**
 * Reads a Messages stream: `message_start` (id, model, input usage), each content block by its
 * `index` from `content_block_start` to `content_block_stop` (text, thinking with its signature,
 * tool_use with `input_json_delta` pieces), `message_delta` (stop reason, output usage) and
 * `message_stop`, which finishes. Blocks of server tools, never asked for by a translated call,
 * are skipped.
 */
export class MessagesStreamReader implements StreamReader {
  readonly #blocks = new Map<number, Block>();
  #usage: Usage = { inputTokens: 0, outputTokens: 0 };
  #finish: FinishReason = 'other';
  #stopSequence: string | undefined;

  read(name: string | undefined, data: unknown): StreamPart[] {
    if (!isObject(data)) return [];
    const type = data.type ?? name;
    if (typeof type !== 'string') throw unreadableStreamEvent('an event without a type');
    if (type === 'error') throw upstreamStreamFailure(data.error);
    const index = typeof data.index === 'number' ? data.index : 0;
    switch (type) {
      case 'message_start': {
        if (!isObject(data.message)) throw unreadableStreamEvent('a message_start without its message');
        const { message } = data;
        this.#usage = readMessagesUsage(message.usage);
        return [
          {
            type: 'start',
            id: String(message.id ?? ''),
            model: String(message.model ?? ''),
            created: Math.floor(Date.now() / 1000),
            usage: this.#usage,
          },
        ];
      }
      case 'content_block_start':
        return this.#start(index, isObject(data.content_block) ? data.content_block : {});
      case 'content_block_delta':
        return this.#delta(index, isObject(data.delta) ? data.delta : {});
      case 'content_block_stop': {
        const block = this.#blocks.get(index);
        this.#blocks.delete(index);
        if (block?.kind === 'text') return [{ type: 'text-end' }];
        if (block?.kind === 'reasoning') return [{ type: 'reasoning-end' }];
        if (block?.kind === 'tool') return [{ type: 'tool-call-end', id: block.id }];
        return [];
      }
      case 'message_delta': {
        const delta = isObject(data.delta) ? data.delta : {};
        if (typeof delta.stop_reason === 'string') this.#finish = FROM_MESSAGES_STOP[delta.stop_reason] ?? 'other';
        if (typeof delta.stop_sequence === 'string') this.#stopSequence = delta.stop_sequence;
        if (isObject(data.usage)) {
          const counted = readMessagesUsage({ ...writeMessagesUsage(this.#usage), ...data.usage });
          this.#usage = counted;
        }
        return [];
      }
      case 'message_stop':
        return [
          { type: 'finish', finishReason: this.#finish, ...(this.#stopSequence !== undefined && { stopSequence: this.#stopSequence }), usage: this.#usage },
        ];
      default:
        return [];
    }
  }

  #start(index: number, block: JsonObject): StreamPart[] {
    switch (block.type) {
      case 'text': {
        this.#blocks.set(index, { kind: 'text' });
        const text = typeof block.text === 'string' ? block.text : '';
        return text === '' ? [{ type: 'text-start' }] : [{ type: 'text-start' }, { type: 'text-delta', delta: text }];
      }
      case 'thinking':
        this.#blocks.set(index, { kind: 'reasoning' });
        return [{ type: 'reasoning-start' }];
      case 'redacted_thinking':
        this.#blocks.set(index, { kind: 'reasoning' });
        return [{ type: 'reasoning-start', redacted: String(block.data ?? '') }];
      case 'tool_use': {
        const id = String(block.id);
        this.#blocks.set(index, { kind: 'tool', id });
        return [{ type: 'tool-call-start', id, name: String(block.name) }];
      }
      default:
        this.#blocks.set(index, { kind: 'other' });
        return [];
    }
  }

  #delta(index: number, delta: JsonObject): StreamPart[] {
    const block = this.#blocks.get(index);
    if (delta.type === 'text_delta' && block?.kind === 'text') return [{ type: 'text-delta', delta: String(delta.text ?? '') }];
    if (delta.type === 'thinking_delta' && block?.kind === 'reasoning') return [{ type: 'reasoning-delta', delta: String(delta.thinking ?? '') }];
    if (delta.type === 'signature_delta' && block?.kind === 'reasoning') return [{ type: 'reasoning-signature', signature: String(delta.signature ?? '') }];
    if (delta.type === 'input_json_delta' && block?.kind === 'tool') {
      const piece = String(delta.partial_json ?? '');
      return piece === '' ? [] : [{ type: 'tool-call-delta', id: block.id, delta: piece }];
    }
    return [];
  }

  end(): StreamPart[] {
    return [];
  }
}

/**
 * Writes a Messages stream: `message_start` (its usage the input known so far), one content block
 * per text, reasoning or tool call, numbered in the order they open, each delta naming its
 * block's index, `message_delta` with the stop reason and the whole usage, `message_stop`.
 */
export class MessagesStreamWriter implements StreamWriter {
  #next = 0;
  #text: number | undefined;
  #reasoning: number | undefined;
  readonly #tools = new Map<string, number>();

  #open(block: JsonObject): { index: number; event: string } {
    const index = this.#next++;
    return { index, event: sse({ type: 'content_block_start', index, content_block: block }, 'content_block_start') };
  }

  write(part: StreamPart): string {
    const delta = (index: number | undefined, body: JsonObject) =>
      index === undefined ? '' : sse({ type: 'content_block_delta', index, delta: body }, 'content_block_delta');
    const stop = (index: number | undefined) => (index === undefined ? '' : sse({ type: 'content_block_stop', index }, 'content_block_stop'));
    switch (part.type) {
      case 'start': {
        const usage = messageUsage(part.usage ?? { inputTokens: 0, outputTokens: 0 });
        const message = {
          id: part.id,
          type: 'message',
          role: 'assistant',
          model: part.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage,
          ...MESSAGE_UNKNOWNS,
        };
        return sse({ type: 'message_start', message }, 'message_start');
      }
      case 'text-start': {
        const opened = this.#open({ type: 'text', text: '' });
        this.#text = opened.index;
        return opened.event;
      }
      case 'text-delta':
        return delta(this.#text, { type: 'text_delta', text: part.delta });
      case 'text-end': {
        const index = this.#text;
        this.#text = undefined;
        return stop(index);
      }
      case 'reasoning-start': {
        const opened = this.#open(
          part.redacted === undefined ? { type: 'thinking', thinking: '', signature: '' } : { type: 'redacted_thinking', data: part.redacted },
        );
        this.#reasoning = opened.index;
        return opened.event;
      }
      case 'reasoning-delta':
        return delta(this.#reasoning, { type: 'thinking_delta', thinking: part.delta });
      case 'reasoning-signature':
        return delta(this.#reasoning, { type: 'signature_delta', signature: part.signature });
      case 'reasoning-end': {
        const index = this.#reasoning;
        this.#reasoning = undefined;
        return stop(index);
      }
      case 'tool-call-start': {
        const opened = this.#open({ type: 'tool_use', id: part.id, name: part.name, input: {}, caller: { type: 'direct' } });
        this.#tools.set(part.id, opened.index);
        return opened.event;
      }
      case 'tool-call-delta':
        return delta(this.#tools.get(part.id), { type: 'input_json_delta', partial_json: part.delta });
      case 'tool-call-end':
        // The index stays known: a late piece of the call's arguments still names its block.
        return stop(this.#tools.get(part.id));
      case 'finish':
        return (
          sse(
            {
              type: 'message_delta',
              delta: { stop_reason: TO_MESSAGES_STOP[part.finishReason], stop_sequence: part.stopSequence ?? null },
              usage: writeMessagesUsage(part.usage),
            },
            'message_delta',
          ) + sse({ type: 'message_stop' }, 'message_stop')
        );
    }
  }

  end(): string {
    return '';
  }
}
