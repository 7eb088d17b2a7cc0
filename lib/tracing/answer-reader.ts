import type { Attributes } from '@opentelemetry/api';
import { isObject, type JsonObject } from '../models/content.js';
import type { ProviderEndpoint } from '../models/provider.js';

/** One message of `gen_ai.output.messages`, in the conventions' JSON schema (text parts only). */
interface OutputMessage {
  role: 'assistant';
  parts: Array<{ type: 'text'; content: string }>;
  finish_reason?: string;
}

const num = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
const str = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * Reads what the GenAI conventions record of an answer (`gen_ai.response.*`, `gen_ai.usage.*`,
 * and, when asked, `gen_ai.output.messages`) from a whole JSON answer or from its stream events
 * one by one, in any of the three formats: Chat Completions, Responses, Messages. Token counts
 * follow the conventions: input tokens include the cached ones (Messages reports them apart).
 */
export class AnswerReader {
  readonly #endpoint: ProviderEndpoint;
  readonly #withContent: boolean;
  #id: string | undefined;
  #model: string | undefined;
  readonly #finishReasons: string[] = [];
  #inputTokens: number | undefined;
  #outputTokens: number | undefined;
  #cacheRead: number | undefined;
  #cacheCreation: number | undefined;
  #reasoning: number | undefined;
  /** The output text of each choice, by index, when content is recorded. */
  readonly #texts: string[] = [];
  readonly #choiceReasons: Array<string | undefined> = [];

  constructor(endpoint: ProviderEndpoint, withContent: boolean) {
    this.#endpoint = endpoint;
    this.#withContent = withContent;
  }

  /** A whole (not streamed) answer. */
  json(body: JsonObject): void {
    if (this.#endpoint === 'countTokens') return;
    this.#ids(body);
    this.#usage(body.usage);
    if (Array.isArray(body.choices)) {
      for (const choice of body.choices) {
        if (!isObject(choice)) continue;
        const index = num(choice.index) ?? 0;
        this.#finish(str(choice.finish_reason), index);
        if (isObject(choice.message)) this.#text(index, choice.message.content);
      }
    } else if (body.type === 'message') {
      this.#finish(str(body.stop_reason), 0);
      this.#blocks(body.content);
    } else if (body.object === 'response') {
      this.#response(body);
    }
  }

  /** The data of one stream event, parsed. */
  event(data: JsonObject): void {
    if (Array.isArray(data.choices)) {
      // A Chat Completions chunk.
      this.#ids(data);
      this.#usage(data.usage);
      for (const choice of data.choices) {
        if (!isObject(choice)) continue;
        const index = num(choice.index) ?? 0;
        this.#finish(str(choice.finish_reason), index);
        if (isObject(choice.delta)) this.#text(index, choice.delta.content);
      }
      return;
    }
    switch (data.type) {
      case 'message_start':
        if (isObject(data.message)) {
          this.#ids(data.message);
          this.#usage(data.message.usage);
        }
        return;
      case 'message_delta':
        if (isObject(data.delta)) this.#finish(str(data.delta.stop_reason), 0);
        this.#usage(data.usage);
        return;
      case 'content_block_delta':
        if (isObject(data.delta)) this.#text(0, data.delta.text);
        return;
      case 'response.output_text.delta':
        this.#text(0, data.delta);
        return;
      case 'response.created':
      case 'response.completed':
      case 'response.incomplete':
      case 'response.failed':
        if (isObject(data.response)) this.#response(data.response, data.type !== 'response.created');
        return;
      default:
    }
  }

  /** The attributes read so far. */
  attributes(): Attributes {
    const attributes: Attributes = {};
    if (this.#id !== undefined) attributes['gen_ai.response.id'] = this.#id;
    if (this.#model !== undefined) attributes['gen_ai.response.model'] = this.#model;
    if (this.#finishReasons.length > 0) attributes['gen_ai.response.finish_reasons'] = this.#finishReasons;
    if (this.#inputTokens !== undefined)
      attributes['gen_ai.usage.input_tokens'] = this.#inputTokens + (this.#endpoint === 'messages' ? (this.#cacheRead ?? 0) + (this.#cacheCreation ?? 0) : 0);
    if (this.#outputTokens !== undefined) attributes['gen_ai.usage.output_tokens'] = this.#outputTokens;
    if (this.#cacheRead !== undefined) attributes['gen_ai.usage.cache_read.input_tokens'] = this.#cacheRead;
    if (this.#cacheCreation !== undefined) attributes['gen_ai.usage.cache_creation.input_tokens'] = this.#cacheCreation;
    if (this.#reasoning !== undefined) attributes['gen_ai.usage.reasoning.output_tokens'] = this.#reasoning;
    if (this.#withContent && this.#texts.length > 0) {
      const messages: OutputMessage[] = this.#texts.map((content, index) => {
        const reason = this.#choiceReasons[index];
        return { role: 'assistant', parts: [{ type: 'text', content }], ...(reason !== undefined && { finish_reason: reason }) };
      });
      attributes['gen_ai.output.messages'] = JSON.stringify(messages);
    }
    return attributes;
  }

  #ids(body: JsonObject): void {
    this.#id ??= str(body.id);
    this.#model ??= str(body.model);
  }

  #finish(reason: string | undefined, index: number): void {
    if (reason === undefined) return;
    this.#finishReasons.push(reason);
    this.#choiceReasons[index] = reason;
  }

  #text(index: number, text: unknown): void {
    if (!this.#withContent || typeof text !== 'string') return;
    this.#texts[index] = (this.#texts[index] ?? '') + text;
  }

  /** Messages' content blocks: their text. */
  #blocks(content: unknown): void {
    if (!Array.isArray(content)) return;
    for (const block of content) if (isObject(block) && block.type === 'text') this.#text(0, block.text);
  }

  /** A Responses response object; `final` once it has ended. */
  #response(response: JsonObject, final = true): void {
    this.#ids(response);
    if (!final) return;
    this.#usage(response.usage);
    const incomplete = isObject(response.incomplete_details) ? str(response.incomplete_details.reason) : undefined;
    this.#finish(incomplete ?? str(response.status), 0);
    if (this.#texts.length > 0 || !Array.isArray(response.output)) return;
    for (const item of response.output) {
      if (!isObject(item) || !Array.isArray(item.content)) continue;
      for (const part of item.content) if (isObject(part) && part.type === 'output_text') this.#text(0, part.text);
    }
  }

  /** Any format's usage object; a later report of a count replaces an earlier one (Messages streams report twice). */
  #usage(usage: unknown): void {
    if (!isObject(usage)) return;
    this.#inputTokens = num(usage.prompt_tokens) ?? num(usage.input_tokens) ?? this.#inputTokens;
    this.#outputTokens = num(usage.completion_tokens) ?? num(usage.output_tokens) ?? this.#outputTokens;
    const inputDetails = isObject(usage.prompt_tokens_details)
      ? usage.prompt_tokens_details
      : isObject(usage.input_tokens_details)
        ? usage.input_tokens_details
        : undefined;
    const outputDetails = isObject(usage.completion_tokens_details)
      ? usage.completion_tokens_details
      : isObject(usage.output_tokens_details)
        ? usage.output_tokens_details
        : undefined;
    this.#cacheRead = num(usage.cache_read_input_tokens) ?? num(inputDetails?.cached_tokens) ?? this.#cacheRead;
    this.#cacheCreation = num(usage.cache_creation_input_tokens) ?? this.#cacheCreation;
    this.#reasoning = num(outputDetails?.reasoning_tokens) ?? this.#reasoning;
  }
}

/**
 * The request's messages as `gen_ai.input.messages` (the conventions' JSON schema, text parts
 * kept, other parts by their type only: an attached PDF is never copied into a trace), with a
 * Messages `system` or a Responses `instructions` as `gen_ai.system_instructions`.
 */
export function inputAttributes(body: JsonObject): Attributes {
  const attributes: Attributes = {};
  const items = Array.isArray(body.messages)
    ? body.messages
    : typeof body.input === 'string'
      ? [{ role: 'user', content: body.input }]
      : Array.isArray(body.input)
        ? body.input
        : [];
  const messages = items.filter(isObject).map((message) => ({ role: str(message.role) ?? 'user', parts: parts(message.content) }));
  if (messages.length > 0) attributes['gen_ai.input.messages'] = JSON.stringify(messages);
  const system = body.system ?? body.instructions;
  if (system !== undefined) attributes['gen_ai.system_instructions'] = JSON.stringify(parts(system));
  return attributes;
}

function parts(content: unknown): unknown[] {
  if (typeof content === 'string') return [{ type: 'text', content }];
  if (!Array.isArray(content)) return [];
  return content.map((part: unknown) => {
    if (!isObject(part)) return { type: 'unknown' };
    const text = str(part.text);
    return text !== undefined ? { type: 'text', content: text } : { type: str(part.type) ?? 'unknown' };
  });
}
