import { tokenCount } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import { textOf, type Answer, type Part, type Usage } from '../neutral.js';
import { FROM_CHAT_FINISH, TO_CHAT_FINISH } from './finish-reasons.js';

/** Chat Completions' `usage`, read: `prompt_tokens` includes the cached ones. */
export function readChatUsage(usage: unknown): Usage {
  if (!isObject(usage)) return { inputTokens: 0, outputTokens: 0 };
  const cached = isObject(usage.prompt_tokens_details) ? tokenCount(usage.prompt_tokens_details.cached_tokens) : 0;
  const reasoning = isObject(usage.completion_tokens_details) ? tokenCount(usage.completion_tokens_details.reasoning_tokens) : 0;
  return {
    inputTokens: tokenCount(usage.prompt_tokens),
    outputTokens: tokenCount(usage.completion_tokens),
    ...(cached > 0 && { cacheReadTokens: cached }),
    ...(reasoning > 0 && { reasoningTokens: reasoning }),
  };
}

export function writeChatUsage(usage: Usage): JsonObject {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cacheReadTokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
  };
}

/** A Chat Completions answer, read: its first choice (a translated call asks for one). */
export function readChatAnswer(body: JsonObject): Answer {
  const choice = Array.isArray(body.choices) && isObject(body.choices[0]) ? body.choices[0] : {};
  const message = isObject(choice.message) ? choice.message : {};
  const content: Part[] = [];
  if (typeof message.content === 'string' && message.content !== '') content.push({ type: 'text', text: message.content });
  const refused = typeof message.refusal === 'string' && message.refusal !== '';
  if (refused) content.push({ type: 'text', text: message.refusal as string });
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls) {
      if (!isObject(call) || !isObject(call.function)) continue;
      content.push({ type: 'tool-call', id: String(call.id), name: String(call.function.name), input: String(call.function.arguments ?? '') });
    }
  }
  const reason = typeof choice.finish_reason === 'string' ? choice.finish_reason : '';
  return {
    id: typeof body.id === 'string' ? body.id : '',
    model: typeof body.model === 'string' ? body.model : '',
    created: typeof body.created === 'number' ? body.created : Math.floor(Date.now() / 1000),
    content,
    finishReason: refused ? 'refusal' : (FROM_CHAT_FINISH[reason] ?? 'other'),
    usage: readChatUsage(body.usage),
  };
}

/**
 * Thinking, which Chat Completions has no place for, where the OpenAI-compatible servers put it:
 * its text in `reasoning_content` (DeepSeek's, vLLM's), its blocks with their signatures in
 * `thinking_blocks` (LiteLLM's), which a client sends back for Claude to go on from its thinking.
 */
export function thinkingFields(parts: readonly Part[]): JsonObject {
  const blocks = parts.flatMap((part): JsonObject[] =>
    part.type === 'reasoning'
      ? [{ type: 'thinking', thinking: part.text, signature: part.signature ?? '' }]
      : part.type === 'redacted-reasoning'
        ? [{ type: 'redacted_thinking', data: part.data }]
        : [],
  );
  if (blocks.length === 0) return {};
  const text = parts.flatMap((part) => (part.type === 'reasoning' ? [part.text] : [])).join('');
  return { reasoning_content: text, thinking_blocks: blocks };
}

/** A neutral answer as a Chat Completions answer: a refusal's text in `refusal`, thinking in `thinkingFields()`. */
export function writeChatAnswer(answer: Answer): JsonObject {
  const refused = answer.finishReason === 'refusal';
  const text = refused ? '' : textOf(answer.content);
  const calls = answer.content.flatMap((part) =>
    part.type === 'tool-call' ? [{ id: part.id, type: 'function', function: { name: part.name, arguments: part.input } }] : [],
  );
  return {
    id: answer.id,
    object: 'chat.completion',
    created: answer.created,
    model: answer.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: refused || (text === '' && calls.length > 0) ? null : text,
          refusal: refused ? textOf(answer.content) : null,
          ...(calls.length > 0 && { tool_calls: calls }),
          ...thinkingFields(answer.content),
          annotations: [],
        },
        logprobs: null,
        finish_reason: TO_CHAT_FINISH[answer.finishReason],
      },
    ],
    usage: writeChatUsage(answer.usage),
  };
}
