import { randomBytes } from 'node:crypto';
import { tokenCount } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import type { Answer, FinishReason, Part, Request, Usage } from '../neutral.js';

/** Why a response is `incomplete` (`incomplete_details.reason`); any other finish is `completed`. */
export const TO_RESPONSES_INCOMPLETE: Readonly<Partial<Record<FinishReason, string>>> = {
  length: 'max_output_tokens',
  'content-filter': 'content_filter',
  refusal: 'content_filter',
};

export const itemId = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

/** Responses' `usage`, read: `input_tokens` counts the cached ones and those written to the cache, reported apart in its details. */
export function readResponsesUsage(usage: unknown): Usage {
  if (!isObject(usage)) return { inputTokens: 0, outputTokens: 0 };
  const details = usage.input_tokens_details;
  const reasoning = isObject(usage.output_tokens_details) ? tokenCount(usage.output_tokens_details.reasoning_tokens) : 0;
  return {
    inputTokens: tokenCount(usage.input_tokens),
    outputTokens: tokenCount(usage.output_tokens),
    ...(isObject(details) && { cacheReadTokens: tokenCount(details.cached_tokens) }),
    ...(isObject(details) && details.cache_write_tokens !== undefined && { cacheWriteTokens: tokenCount(details.cache_write_tokens) }),
    ...(reasoning > 0 && { reasoningTokens: reasoning }),
  };
}

export function writeResponsesUsage(usage: Usage): JsonObject {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cacheReadTokens ?? 0, cache_write_tokens: usage.cacheWriteTokens ?? 0 },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}

/** A response object: the request's settings, `output` and `usage` as given (none while the response is in progress, as OpenAI's schema has it). */
export function buildResponseObject(
  head: { id: string; model: string; created: number },
  request: Request,
  status: string,
  output: JsonObject[],
  usage: Usage | null,
  finishReason?: FinishReason,
): JsonObject {
  const incomplete = finishReason === undefined ? undefined : TO_RESPONSES_INCOMPLETE[finishReason];
  const { responseFormat } = request;
  return {
    id: head.id,
    object: 'response',
    created_at: head.created,
    status,
    background: false,
    error: null,
    incomplete_details: incomplete === undefined ? null : { reason: incomplete },
    instructions: request.system.length > 0 ? request.system.join('\n\n') : null,
    max_output_tokens: request.maxTokens ?? null,
    model: head.model,
    output,
    parallel_tool_calls: request.parallelToolCalls ?? true,
    previous_response_id: null,
    reasoning: { effort: request.reasoning?.effort ?? null, summary: null },
    store: false,
    temperature: request.temperature ?? 1,
    text: {
      format:
        responseFormat === undefined
          ? { type: 'text' }
          : responseFormat.type === 'json'
            ? { type: 'json_object' }
            : { type: 'json_schema', name: responseFormat.name, schema: responseFormat.schema, strict: responseFormat.strict ?? false },
    },
    tool_choice:
      request.toolChoice === undefined
        ? 'auto'
        : request.toolChoice.type === 'tool'
          ? { type: 'function', name: request.toolChoice.name }
          : request.toolChoice.type,
    tools: request.tools.map((tool) => ({
      type: 'function',
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.parameters,
      strict: false,
    })),
    top_p: request.topP ?? 1,
    truncation: 'disabled',
    ...(usage !== null && { usage: writeResponsesUsage(usage) }),
    metadata: {},
  };
}

export const outputText = (text: string) => ({ type: 'output_text', text, annotations: [], logprobs: [] });

/** The model's refusal as a message's content part: an SDK's `output_text` does not take it for the answer. */
export const refusalPart = (refusal: string) => ({ type: 'refusal', refusal });

/**
 * A reasoning part as a reasoning item: the thinking in its summary, the signature that lets it
 * be sent back in `encrypted_content` (redacted thinking: no summary, its data there).
 */
export function reasoningItem(id: string, part: Extract<Part, { type: 'reasoning' | 'redacted-reasoning' }>): JsonObject {
  return part.type === 'reasoning'
    ? { id, type: 'reasoning', summary: [{ type: 'summary_text', text: part.text }], encrypted_content: part.signature ?? null }
    : { id, type: 'reasoning', summary: [], encrypted_content: part.data };
}

/** The output items of an answer: reasoning, one message for its text (a refusal's as refusal parts), a function call per tool call, in order. */
function outputItems(content: Part[], refused: boolean): JsonObject[] {
  const items: JsonObject[] = [];
  let message: { content: JsonObject[] } | undefined;
  for (const part of content) {
    if (part.type === 'text') {
      if (message === undefined) {
        message = { content: [] };
        items.push({ id: itemId('msg'), type: 'message', status: 'completed', role: 'assistant', content: message.content });
      }
      message.content.push(refused ? refusalPart(part.text) : outputText(part.text));
    } else if (part.type === 'tool-call') {
      items.push({ id: itemId('fc'), type: 'function_call', status: 'completed', call_id: part.id, name: part.name, arguments: part.input });
    } else if (part.type === 'reasoning' || part.type === 'redacted-reasoning') {
      items.push(reasoningItem(itemId('rs'), part));
    }
  }
  return items;
}

/** A neutral answer as a response object, `incomplete` when it stopped at the output limit or a filter. */
export function writeResponsesAnswer(answer: Answer, request: Request): JsonObject {
  const status = TO_RESPONSES_INCOMPLETE[answer.finishReason] === undefined ? 'completed' : 'incomplete';
  return buildResponseObject(
    { id: responseId(answer.id), model: answer.model, created: answer.created },
    request,
    status,
    outputItems(answer.content, answer.finishReason === 'refusal'),
    answer.usage,
    answer.finishReason,
  );
}

/** The upstream's answer id as a response id (`resp_...`), so that it still names the upstream's answer. */
export const responseId = (id: string) => (id.startsWith('resp_') ? id : `resp_${id}`);
