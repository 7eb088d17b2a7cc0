import type { Attributes } from '@opentelemetry/api';
import { isObject, type JsonObject } from '../models/content.js';
import type { AnswerTrace, TracedAnswer } from '../models/formats/format.js';
import { FORMATS } from '../models/formats/registry.js';
import type { ProviderEndpoint } from '../models/provider.js';
import type { TokenUsage } from '../usage/token-usage.js';

/** One message of `gen_ai.output.messages`, in the conventions' JSON schema (text parts only). */
interface OutputMessage {
  role: 'assistant';
  parts: Array<{ type: 'text'; content: string }>;
  finish_reason?: string;
}

const str = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

/**
 * Reads what the GenAI conventions record of an answer (`gen_ai.response.*`, `gen_ai.usage.*`,
 * and, when asked, `gen_ai.output.messages`) from a whole JSON answer or from its stream events
 * one by one, through its format's `trace` reader and usage reader (the registry's). Token counts
 * follow the conventions: input tokens include the cached ones.
 */
export class AnswerReader implements TracedAnswer {
  readonly #trace: AnswerTrace;
  readonly #withContent: boolean;
  #id: string | undefined;
  #model: string | undefined;
  readonly #finishReasons: string[] = [];
  readonly #usage: Partial<TokenUsage> = {};
  /** The output text of each choice, by index, when content is recorded. */
  readonly #texts: string[] = [];
  readonly #choiceReasons: Array<string | undefined> = [];

  constructor(endpoint: ProviderEndpoint, withContent: boolean) {
    this.#trace = FORMATS[endpoint].trace;
    this.#withContent = withContent;
  }

  /** A whole (not streamed) answer. */
  json(body: JsonObject): void {
    this.#trace.json(body, this);
  }

  /** The data of one stream event, parsed. */
  event(data: JsonObject): void {
    this.#trace.event(data, this);
  }

  /** The attributes read so far. */
  attributes(): Attributes {
    const attributes: Attributes = {};
    if (this.#id !== undefined) attributes['gen_ai.response.id'] = this.#id;
    if (this.#model !== undefined) attributes['gen_ai.response.model'] = this.#model;
    if (this.#finishReasons.length > 0) attributes['gen_ai.response.finish_reasons'] = this.#finishReasons;
    const { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens, reasoningTokens } = this.#usage;
    if (inputTokens !== undefined) attributes['gen_ai.usage.input_tokens'] = inputTokens;
    if (outputTokens !== undefined) attributes['gen_ai.usage.output_tokens'] = outputTokens;
    if (cacheReadTokens !== undefined) attributes['gen_ai.usage.cache_read.input_tokens'] = cacheReadTokens;
    if (cacheWriteTokens !== undefined) attributes['gen_ai.usage.cache_creation.input_tokens'] = cacheWriteTokens;
    if (reasoningTokens !== undefined) attributes['gen_ai.usage.reasoning.output_tokens'] = reasoningTokens;
    if (this.#withContent && this.#texts.length > 0) {
      const messages: OutputMessage[] = this.#texts.map((content, index) => {
        const reason = this.#choiceReasons[index];
        return { role: 'assistant', parts: [{ type: 'text', content }], ...(reason !== undefined && { finish_reason: reason }) };
      });
      attributes['gen_ai.output.messages'] = JSON.stringify(messages);
    }
    return attributes;
  }

  ids(id: unknown, model: unknown): void {
    this.#id ??= str(id);
    this.#model ??= str(model);
  }

  finish(reason: unknown, index: number): void {
    const told = str(reason);
    if (told === undefined) return;
    this.#finishReasons.push(told);
    this.#choiceReasons[index] = told;
  }

  text(index: number, text: unknown): void {
    if (!this.#withContent || typeof text !== 'string') return;
    this.#texts[index] = (this.#texts[index] ?? '') + text;
  }

  usage(usage: Partial<TokenUsage>): void {
    Object.assign(this.#usage, usage);
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
