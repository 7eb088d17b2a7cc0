import type { JsonObject } from '../../content.js';
import { sse, type Request, type StreamPart, type StreamWriter } from '../neutral.js';
import { buildResponseObject, itemId, outputText, reasoningItem, refusalPart, responseId, TO_RESPONSES_INCOMPLETE } from './answer.js';

/** The item being written, with what its events need. */
interface OpenItem {
  index: number;
  item: JsonObject;
  text: string;
  /** A message that is the model's refusal: its part and events are `refusal`'s. */
  refusal?: boolean;
}

/**
 * Writes a Responses stream: `response.created` and `response.in_progress`; per text a message
 * item (`output_item.added`, `content_part.added`, `output_text.delta`s, or for a refusal
 * `refusal.delta`s, then the `.done`s); per
 * tool call a function_call item (`function_call_arguments.delta`s and `.done`, several open at
 * once if the upstream interleaves them); per reasoning a reasoning item whose summary grows by
 * `reasoning_summary_text.delta` and whose signature is its `encrypted_content`; then
 * `response.completed` (or `response.incomplete`) with the whole response and its usage. Each
 * event numbered by `sequence_number`.
 */
export class ResponsesStreamWriter implements StreamWriter {
  readonly #request: Request;
  #head = { id: '', model: '', created: 0 };
  #sequence = 0;
  readonly #output: JsonObject[] = [];
  #text: OpenItem | undefined;
  #reasoning: OpenItem | undefined;
  readonly #tools = new Map<string, OpenItem>();

  constructor(request: Request) {
    this.#request = request;
  }

  #event(data: JsonObject): string {
    return sse({ ...data, sequence_number: this.#sequence++ }, String(data.type));
  }

  #add(item: JsonObject): OpenItem {
    const open = { index: this.#output.length, item, text: '' };
    this.#output.push(item);
    return open;
  }

  write(part: StreamPart): string {
    switch (part.type) {
      case 'start': {
        this.#head = { id: responseId(part.id), model: part.model, created: part.created };
        const response = buildResponseObject(this.#head, this.#request, 'in_progress', [], null);
        return this.#event({ type: 'response.created', response }) + this.#event({ type: 'response.in_progress', response });
      }
      case 'text-start': {
        const open = {
          ...this.#add({ id: itemId('msg'), type: 'message', status: 'in_progress', role: 'assistant', content: [] }),
          refusal: part.refusal === true,
        };
        this.#text = open;
        const at = { item_id: open.item.id, output_index: open.index, content_index: 0 };
        return (
          this.#event({ type: 'response.output_item.added', output_index: open.index, item: { ...open.item, content: [] } }) +
          this.#event({ type: 'response.content_part.added', ...at, part: open.refusal ? refusalPart('') : outputText('') })
        );
      }
      case 'text-delta': {
        const open = this.#text;
        if (open === undefined) return '';
        open.text += part.delta;
        const at = { item_id: open.item.id, output_index: open.index, content_index: 0 };
        return open.refusal
          ? this.#event({ type: 'response.refusal.delta', ...at, delta: part.delta })
          : this.#event({ type: 'response.output_text.delta', ...at, delta: part.delta, logprobs: [] });
      }
      case 'text-end': {
        const open = this.#text;
        if (open === undefined) return '';
        this.#text = undefined;
        const at = { item_id: open.item.id, output_index: open.index, content_index: 0 };
        const done = open.refusal ? refusalPart(open.text) : outputText(open.text);
        Object.assign(open.item, { status: 'completed', content: [done] });
        return (
          (open.refusal
            ? this.#event({ type: 'response.refusal.done', ...at, refusal: open.text })
            : this.#event({ type: 'response.output_text.done', ...at, text: open.text, logprobs: [] })) +
          this.#event({ type: 'response.content_part.done', ...at, part: done }) +
          this.#event({ type: 'response.output_item.done', output_index: open.index, item: open.item })
        );
      }
      case 'reasoning-start': {
        const id = itemId('rs');
        const open = this.#add(
          part.redacted === undefined
            ? { id, type: 'reasoning', summary: [], encrypted_content: null }
            : reasoningItem(id, { type: 'redacted-reasoning', data: part.redacted }),
        );
        this.#reasoning = open;
        const added = this.#event({ type: 'response.output_item.added', output_index: open.index, item: open.item });
        if (part.redacted !== undefined) return added;
        return (
          added +
          this.#event({
            type: 'response.reasoning_summary_part.added',
            item_id: id,
            output_index: open.index,
            summary_index: 0,
            part: { type: 'summary_text', text: '' },
          })
        );
      }
      case 'reasoning-delta': {
        const open = this.#reasoning;
        if (open === undefined) return '';
        open.text += part.delta;
        return this.#event({
          type: 'response.reasoning_summary_text.delta',
          item_id: open.item.id,
          output_index: open.index,
          summary_index: 0,
          delta: part.delta,
        });
      }
      case 'reasoning-signature':
        if (this.#reasoning) this.#reasoning.item.encrypted_content = part.signature;
        return '';
      case 'reasoning-end': {
        const open = this.#reasoning;
        if (open === undefined) return '';
        this.#reasoning = undefined;
        const redacted = Array.isArray(open.item.summary) && open.item.summary.length === 0 && open.text === '' && open.item.encrypted_content !== null;
        if (!redacted) open.item.summary = [{ type: 'summary_text', text: open.text }];
        const at = { item_id: open.item.id, output_index: open.index, summary_index: 0 };
        const summaryDone = redacted
          ? ''
          : this.#event({ type: 'response.reasoning_summary_text.done', ...at, text: open.text }) +
            this.#event({ type: 'response.reasoning_summary_part.done', ...at, part: { type: 'summary_text', text: open.text } });
        return summaryDone + this.#event({ type: 'response.output_item.done', output_index: open.index, item: open.item });
      }
      case 'tool-call-start': {
        const open = this.#add({ id: itemId('fc'), type: 'function_call', status: 'in_progress', call_id: part.id, name: part.name, arguments: '' });
        this.#tools.set(part.id, open);
        return this.#event({ type: 'response.output_item.added', output_index: open.index, item: { ...open.item } });
      }
      case 'tool-call-delta': {
        const open = this.#tools.get(part.id);
        if (open === undefined) return '';
        open.text += part.delta;
        return this.#event({ type: 'response.function_call_arguments.delta', item_id: open.item.id, output_index: open.index, delta: part.delta });
      }
      case 'tool-call-end': {
        const open = this.#tools.get(part.id);
        if (open === undefined) return '';
        this.#tools.delete(part.id);
        Object.assign(open.item, { status: 'completed', arguments: open.text });
        return (
          this.#event({
            type: 'response.function_call_arguments.done',
            item_id: open.item.id,
            output_index: open.index,
            name: open.item.name,
            arguments: open.text,
          }) + this.#event({ type: 'response.output_item.done', output_index: open.index, item: open.item })
        );
      }
      case 'finish': {
        const incomplete = TO_RESPONSES_INCOMPLETE[part.finishReason] !== undefined;
        const status = incomplete ? 'incomplete' : 'completed';
        const response = buildResponseObject(this.#head, this.#request, status, this.#output, part.usage, part.finishReason);
        return this.#event({ type: incomplete ? 'response.incomplete' : 'response.completed', response });
      }
    }
  }

  end(): string {
    return '';
  }
}
