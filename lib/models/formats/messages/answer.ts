import { tokenCount } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import type { Answer, Part, Usage } from '../neutral.js';
import { argumentsObject } from '../wire-format.js';
import { FROM_MESSAGES_STOP, TO_MESSAGES_STOP } from './finish-reasons.js';

/** Messages' `usage`, read: its `input_tokens` leaves out cache reads and writes, which neutral input includes. */
export function readMessagesUsage(usage: unknown): Usage {
  if (!isObject(usage)) return { inputTokens: 0, outputTokens: 0 };
  const cached = tokenCount(usage.cache_read_input_tokens);
  const written = tokenCount(usage.cache_creation_input_tokens);
  return {
    inputTokens: tokenCount(usage.input_tokens) + cached + written,
    outputTokens: tokenCount(usage.output_tokens),
    ...(cached > 0 && { cacheReadTokens: cached }),
    ...(written > 0 && { cacheWriteTokens: written }),
  };
}

/** What a stream's `message_delta` counts: the output so far, and, in newer versions, the input again. */
export function readMessagesDeltaUsage(usage: JsonObject): Partial<Usage> {
  const read = readMessagesUsage(usage);
  return {
    ...('output_tokens' in usage && { outputTokens: read.outputTokens }),
    ...('input_tokens' in usage && { inputTokens: read.inputTokens, cacheReadTokens: read.cacheReadTokens ?? 0, cacheWriteTokens: read.cacheWriteTokens ?? 0 }),
  };
}

export function writeMessagesUsage(usage: Usage): JsonObject {
  const cached = usage.cacheReadTokens ?? 0;
  const written = usage.cacheWriteTokens ?? 0;
  return {
    input_tokens: Math.max(0, usage.inputTokens - cached - written),
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cached,
    output_tokens: usage.outputTokens,
  };
}

/**
 * A Message's `usage`, with every field @anthropic-ai/sdk's `Usage` declares: what another format
 * does not tell (the tier served, the region, server tools) is null.
 */
export const messageUsage = (usage: Usage): JsonObject => ({
  ...writeMessagesUsage(usage),
  cache_creation: null,
  inference_geo: null,
  output_tokens_details: null,
  server_tool_use: null,
  service_tier: null,
  speed: null,
});

/** The fields of a Message no translated answer has (no container, diagnostics or refusal details): null, as the SDK's `Message` declares them. */
export const MESSAGE_UNKNOWNS = { container: null, diagnostics: null, stop_details: null } as const;

/** One content block of an answer, read; blocks of server tools (never asked for by a translated call) are left out. */
export function readMessagesBlock(block: unknown): Part | undefined {
  if (!isObject(block)) return undefined;
  switch (block.type) {
    case 'text':
      return { type: 'text', text: String(block.text ?? '') };
    case 'tool_use':
      return { type: 'tool-call', id: String(block.id), name: String(block.name), input: JSON.stringify(block.input ?? {}) };
    case 'thinking':
      return { type: 'reasoning', text: String(block.thinking ?? ''), ...(typeof block.signature === 'string' && { signature: block.signature }) };
    case 'redacted_thinking':
      return { type: 'redacted-reasoning', data: String(block.data ?? '') };
    default:
      return undefined;
  }
}

export function readMessagesAnswer(body: JsonObject): Answer {
  const content = Array.isArray(body.content) ? body.content.flatMap((block) => readMessagesBlock(block) ?? []) : [];
  const reason = typeof body.stop_reason === 'string' ? body.stop_reason : '';
  return {
    id: typeof body.id === 'string' ? body.id : '',
    model: typeof body.model === 'string' ? body.model : '',
    created: Math.floor(Date.now() / 1000),
    content,
    finishReason: FROM_MESSAGES_STOP[reason] ?? 'other',
    ...(typeof body.stop_sequence === 'string' && { stopSequence: body.stop_sequence }),
    usage: readMessagesUsage(body.usage),
  };
}

/** One part of an answer as a content block; an empty text is no block. */
export function writeMessagesBlock(part: Part): JsonObject | undefined {
  switch (part.type) {
    case 'text':
      return part.text === '' ? undefined : { type: 'text', text: part.text };
    case 'tool-call':
      // Called by the model itself: the one caller a translated call has.
      return { type: 'tool_use', id: part.id, name: part.name, input: argumentsObject(part.input), caller: { type: 'direct' } };
    case 'reasoning':
      return { type: 'thinking', thinking: part.text, signature: part.signature ?? '' };
    case 'redacted-reasoning':
      return { type: 'redacted_thinking', data: part.data };
    default:
      return undefined;
  }
}

export function writeMessagesAnswer(answer: Answer): JsonObject {
  return {
    id: answer.id,
    type: 'message',
    role: 'assistant',
    model: answer.model,
    content: answer.content.flatMap((part) => writeMessagesBlock(part) ?? []),
    stop_reason: TO_MESSAGES_STOP[answer.finishReason],
    stop_sequence: answer.stopSequence ?? null,
    usage: messageUsage(answer.usage),
    ...MESSAGE_UNKNOWNS,
  };
}
