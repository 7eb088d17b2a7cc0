import { createHash } from 'node:crypto';
import { errors } from '../../../errors/gateway-error.js';
import { isObject, type JsonObject } from '../../content.js';
import { EFFORT_BUDGETS, invalid, OPENAI_SHARED_FIELDS, untranslatable, type Answer, type FinishReason, type Part, type Usage } from '../../formats/neutral.js';
import { argumentsObject, omit, type ReadRequest } from '../../formats/wire-format.js';

// Bedrock Runtime's Converse API (POST /model/{modelId}/converse and /converse-stream): the
// neutral representation written as its request and read from its answer. Its rules, which
// Bedrock enforces for every model with a 400 (docs/CONFIGURATION.md, "bedrock"): roles
// alternate; an assistant turn holds its reasoning, then its text, then its tool uses; the user
// turn after it opens with one tool result per tool use, in their order; tool uses and results
// need the tools declared.

/** The API's name, as refusals name it. */
export const CONVERSE = 'Bedrock Converse';

/** The output limit sent with reasoning when the client gave none: the budget is on top of it. */
const DEFAULT_MAX_TOKENS = 4096;
/** The least thinking budget Claude takes. */
const MIN_THINKING_BUDGET = 1024;

const IMAGE_FORMATS: Readonly<Record<string, string>> = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' };

/** Bedrock's stop reasons, as the neutral ones. */
export const FROM_STOP_REASON: Readonly<Record<string, FinishReason>> = {
  end_turn: 'stop',
  tool_use: 'tool-calls',
  max_tokens: 'length',
  stop_sequence: 'stop-sequence',
  guardrail_intervened: 'content-filter',
  content_filtered: 'content-filter',
  model_context_window_exceeded: 'length',
};

/**
 * A document's name as Converse takes it (letters, digits, single spaces, hyphens, parentheses
 * and square brackets), unique in the request: the file's name without its extension, else `document`.
 */
function documentName(filename: string | undefined, taken: Set<string>): string {
  const base =
    (filename ?? '')
      .replace(/\.[^.]*$/, '')
      .replace(/[^A-Za-z0-9\s\-()[\]]/g, '-')
      .replace(/\s+/g, ' ')
      .trim()
      .slice(0, 200) || 'document';
  let name = base;
  for (let n = 2; taken.has(name); n += 1) name = `${base} (${n})`;
  taken.add(name);
  return name;
}

const TOOL_USE_ID = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A tool call's id as Converse takes it (1 to 64 letters, digits, `_` and `-`): as it is when it
 * fits, else a name made from its hash, the same for the call and its result. Ids of other
 * providers' calls (a Gemini call's carries its signature) go back to Bedrock this way.
 */
export function toolUseId(id: string): string {
  return TOOL_USE_ID.test(id) ? id : `tooluse_${createHash('sha256').update(id).digest('base64url').slice(0, 43)}`;
}

/** What writing one request keeps track of: the documents' names, and where refusals point. */
interface Writing {
  request: ReadRequest;
  documents: Set<string>;
}

function where(writing: Writing): string {
  return writing.request.params.messages ?? 'messages';
}

function writeBlock(part: Part, writing: Writing): JsonObject {
  switch (part.type) {
    case 'text':
      return { text: part.text };
    case 'image': {
      if ('url' in part.source) throw untranslatable(`${where(writing)} (an image by URL)`, CONVERSE);
      const format = IMAGE_FORMATS[part.source.mediaType];
      if (format === undefined) throw untranslatable(`${where(writing)} (a ${part.source.mediaType} image)`, CONVERSE);
      return { image: { format, source: { bytes: part.source.data } } };
    }
    case 'file':
      if (part.mediaType !== 'application/pdf') throw untranslatable(`${where(writing)} (a ${part.mediaType} file)`, CONVERSE);
      return { document: { format: 'pdf', name: documentName(part.filename, writing.documents), source: { bytes: part.data } } };
    case 'tool-call':
      return { toolUse: { toolUseId: toolUseId(part.id), name: part.name, input: argumentsObject(part.input) } };
    case 'tool-result':
      return {
        toolResult: {
          toolUseId: toolUseId(part.callId),
          content: part.content.filter((inner) => inner.type !== 'text' || inner.text !== '').map((inner) => writeBlock(inner, writing)),
          ...(part.isError && { status: 'error' }),
        },
      };
    case 'reasoning':
      return { reasoningContent: { reasoningText: { text: part.text, ...(part.signature !== undefined && { signature: part.signature }) } } };
    case 'redacted-reasoning':
      return { reasoningContent: { redactedContent: part.data } };
  }
}

/** Whether a part is reasoning the model signed, which alone goes back to it. */
const signed = (part: Part) => (part.type === 'reasoning' && part.signature !== undefined && part.signature !== '') || part.type === 'redacted-reasoning';

const RANK: Readonly<Record<Part['type'], number>> = {
  'tool-result': 0,
  reasoning: 1,
  'redacted-reasoning': 1,
  text: 2,
  image: 2,
  file: 2,
  'tool-call': 3,
};

/**
 * The turns as Converse takes them: consecutive turns of one role merged; in each, tool results
 * first (in the order of the tool uses they answer), reasoning, content, tool uses last; empty
 * texts and unsigned reasoning left out (the latter named `thinking`).
 */
function writeMessages(writing: Writing): JsonObject[] {
  const { request } = writing;
  const merged: Array<{ role: 'user' | 'assistant'; parts: Part[] }> = [];
  for (const message of request.messages) {
    const last = merged.at(-1);
    if (last?.role === message.role) last.parts.push(...message.parts);
    else merged.push({ role: message.role, parts: [...message.parts] });
  }
  const written: JsonObject[] = [];
  let callOrder: string[] = [];
  for (const { role, parts } of merged) {
    // Reasoning given back goes only with the signature Bedrock gave it: another model's is left out, named as Messages names it.
    if (parts.some((part) => part.type === 'reasoning' && !signed(part))) omit(request.omitted, 'thinking');
    const kept = parts.filter((part) => (part.type !== 'text' || part.text !== '') && (part.type !== 'reasoning' || signed(part)));
    const order = (part: Part) => (part.type === 'tool-result' ? callOrder.indexOf(part.callId) : 0);
    // A stable sort: content keeps its order within its rank.
    kept.sort((a, b) => RANK[a.type] - RANK[b.type] || order(a) - order(b));
    callOrder = role === 'assistant' ? kept.flatMap((part) => (part.type === 'tool-call' ? [part.id] : [])) : [];
    if (kept.length > 0) written.push({ role, content: kept.map((part) => writeBlock(part, writing)) });
  }
  return written;
}

function usesTools(request: ReadRequest): boolean {
  return request.messages.some((message) => message.parts.some((part) => part.type === 'tool-call' || part.type === 'tool-result'));
}

/** `toolConfig`: the tools and the choice; tool choice `none` as no tools, which a conversation with tool calls cannot do without. */
function writeToolConfig(request: ReadRequest): JsonObject | undefined {
  const { tools, toolChoice, params } = request;
  if (request.parallelToolCalls === false && tools.length > 0) throw untranslatable(params.parallelToolCalls ?? 'parallel_tool_calls', CONVERSE);
  const declared = tools.length > 0 && toolChoice?.type !== 'none';
  if (!declared) {
    if (usesTools(request)) {
      if (tools.length > 0) throw untranslatable(`${params.toolChoice ?? 'tool_choice'} none`, CONVERSE);
      throw invalid(params.messages ?? 'messages', `hold tool calls or results: ${CONVERSE} needs their tools declared in 'tools'`);
    }
    return undefined;
  }
  const choice =
    toolChoice?.type === 'required' ? { any: {} } : toolChoice?.type === 'tool' ? { tool: { name: toolChoice.name } } : toolChoice ? { auto: {} } : undefined;
  return {
    tools: tools.map((tool) => ({
      toolSpec: {
        name: tool.name,
        ...(tool.description !== undefined && tool.description !== '' && { description: tool.description }),
        inputSchema: { json: tool.parameters },
        ...(tool.strict && { strict: true }),
      },
    })),
    ...(choice && { toolChoice: choice }),
  };
}

/** Whether the last assistant turn called tools without the signed reasoning that came before the calls. */
function unsignedToolTurn(request: ReadRequest): boolean {
  const last = request.messages.findLast((message) => message.role === 'assistant');
  return last !== undefined && last.parts.some((part) => part.type === 'tool-call') && !last.parts.some(signed);
}

/**
 * Reasoning as Claude on Bedrock takes it (`additionalModelRequestFields.thinking`): a budget, an
 * effort's budget (`EFFORT_BUDGETS`), or adaptive; below the client's max tokens and at least 1,024.
 * Amid a tool loop whose reasoning the client did not give back, the turn goes without, named.
 */
function writeThinking(request: ReadRequest): { thinking?: JsonObject; budget?: number } {
  const { reasoning, params } = request;
  if (reasoning === undefined || reasoning.effort === 'none') return {};
  if (unsignedToolTurn(request)) {
    omit(request.omitted, params.reasoning ?? 'reasoning');
    return {};
  }
  // Claude thinks only at temperature 1, with a top_p of 0.95 or more, choosing its tools itself: refused here, as Bedrock would.
  const withThinking = (param: string | undefined, fallback: string, why: string) =>
    errors.invalidRequest(`'${param ?? fallback}' cannot be sent to this model with '${params.reasoning ?? 'reasoning'}': its provider ${why}`);
  if (request.temperature !== undefined && request.temperature !== 1) throw withThinking(params.temperature, 'temperature', 'thinks at temperature 1 only');
  if (request.topP !== undefined && request.topP < 0.95) throw withThinking(params.topP, 'top_p', 'thinks with a top_p of 0.95 to 1 only');
  const forced = request.toolChoice?.type === 'required' || request.toolChoice?.type === 'tool';
  if (forced && request.tools.length > 0) throw withThinking(params.toolChoice, 'tool_choice', 'cannot be made to call a tool while it thinks');
  if (reasoning.adaptive && reasoning.budgetTokens === undefined && reasoning.effort === undefined) return { thinking: { type: 'adaptive' } };
  const wanted = reasoning.budgetTokens ?? EFFORT_BUDGETS[reasoning.effort as Exclude<typeof reasoning.effort, 'none' | undefined>];
  const budget = request.maxTokens === undefined ? wanted : Math.min(wanted, request.maxTokens - 1);
  if (budget < MIN_THINKING_BUDGET)
    throw withThinking(params.maxTokens, 'max_tokens', `thinks with at least ${MIN_THINKING_BUDGET} tokens, and answers in more`);
  return { thinking: { type: 'enabled', budget_tokens: budget }, budget };
}

/** Bedrock's service tiers (`serviceTier.type`) by OpenAI's names; `auto` is Bedrock's default. */
const SERVICE_TIERS: ReadonlySet<string> = new Set(['default', 'flex', 'priority']);

/**
 * A neutral request as a Converse body (the model is in the path): system prompts as `system`
 * blocks, the turns as `writeMessages()` orders them, PDFs as document blocks, the limits in
 * `inferenceConfig`, tools in `toolConfig`, a JSON schema as structured output
 * (`outputConfig.textFormat`), reasoning as Claude's `thinking`. A conversation of only
 * instructions sends them as its user turn. Refused by the client's names: JSON mode without a
 * schema, at most one tool call a turn, a verbosity, images by URL. `request.omitted` gains what
 * is left out: the end user's id and OpenAI's caching hints, reasoning Bedrock did not sign.
 */
export function writeConverseRequest(request: ReadRequest): JsonObject {
  const { params, responseFormat } = request;
  if (responseFormat?.type === 'json') throw untranslatable(`${params.responseFormat ?? 'response_format'} json_object`, CONVERSE);
  if (request.verbosity !== undefined) throw untranslatable(params.verbosity ?? 'verbosity', CONVERSE);
  if (request.serviceTier !== undefined && request.serviceTier !== 'auto' && !SERVICE_TIERS.has(request.serviceTier))
    throw untranslatable(`${params.serviceTier ?? 'service_tier'} ${request.serviceTier}`, CONVERSE);
  if (request.user !== undefined) omit(request.omitted, params.user ?? 'user');
  for (const field of OPENAI_SHARED_FIELDS) if (request.openAI?.[field] !== undefined) omit(request.omitted, field);
  const writing: Writing = { request, documents: new Set() };
  const toolConfig = writeToolConfig(request);
  const { thinking, budget } = writeThinking(request);
  let messages = writeMessages(writing);
  let system = request.system.filter((text) => text !== '');
  if (messages.length === 0) {
    if (system.length === 0) throw invalid(params.messages ?? 'messages', 'must hold a user turn with content');
    messages = [{ role: 'user', content: [{ text: system.join('\n\n') }] }];
    system = [];
  }
  const maxTokens = request.maxTokens ?? (budget === undefined ? undefined : DEFAULT_MAX_TOKENS + budget);
  const inferenceConfig = {
    ...(maxTokens !== undefined && { maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { topP: request.topP }),
    ...(request.stop && { stopSequences: request.stop }),
  };
  return {
    messages,
    ...(system.length > 0 && { system: system.map((text) => ({ text })) }),
    ...(Object.keys(inferenceConfig).length > 0 && { inferenceConfig }),
    ...(toolConfig && { toolConfig }),
    ...(responseFormat?.type === 'json-schema' && {
      outputConfig: {
        textFormat: { type: 'json_schema', structure: { jsonSchema: { schema: JSON.stringify(responseFormat.schema), name: responseFormat.name } } },
      },
    }),
    ...(thinking && { additionalModelRequestFields: { thinking } }),
    ...(request.serviceTier !== undefined && SERVICE_TIERS.has(request.serviceTier) && { serviceTier: { type: request.serviceTier } }),
  };
}

const count = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0);

/**
 * Converse's `usage` as the neutral one: Bedrock counts the input apart from the cache's reads
 * and writes, which the neutral input includes.
 */
export function readConverseUsage(usage: unknown): Usage {
  const counts = isObject(usage) ? usage : {};
  const cacheRead = count(counts.cacheReadInputTokens);
  const cacheWrite = count(counts.cacheWriteInputTokens);
  return {
    inputTokens: count(counts.inputTokens) + cacheRead + cacheWrite,
    outputTokens: count(counts.outputTokens),
    ...(counts.cacheReadInputTokens !== undefined && { cacheReadTokens: cacheRead }),
    ...(counts.cacheWriteInputTokens !== undefined && { cacheWriteTokens: cacheWrite }),
  };
}

/** A stop reason, and the stop sequence met where the model says which (Claude's `stop_sequence`). */
export function readStop(stopReason: unknown, fields: unknown): Pick<Answer, 'finishReason' | 'stopSequence'> {
  const finishReason = (typeof stopReason === 'string' && FROM_STOP_REASON[stopReason]) || 'other';
  const sequence = isObject(fields) ? fields.stop_sequence : undefined;
  return { finishReason, ...(finishReason === 'stop-sequence' && typeof sequence === 'string' && { stopSequence: sequence }) };
}

/** One content block of an answer, as neutral parts (none for a kind it does not know). */
function readBlock(block: unknown): Part[] {
  if (!isObject(block)) return [];
  if (typeof block.text === 'string') return [{ type: 'text', text: block.text }];
  const { toolUse, reasoningContent } = block;
  if (isObject(toolUse))
    return [{ type: 'tool-call', id: String(toolUse.toolUseId ?? ''), name: String(toolUse.name ?? ''), input: JSON.stringify(toolUse.input ?? {}) }];
  if (isObject(reasoningContent)) {
    const { reasoningText, redactedContent } = reasoningContent;
    if (typeof redactedContent === 'string') return [{ type: 'redacted-reasoning', data: redactedContent }];
    if (isObject(reasoningText))
      return [
        {
          type: 'reasoning',
          text: String(reasoningText.text ?? ''),
          ...(typeof reasoningText.signature === 'string' && { signature: reasoningText.signature }),
        },
      ];
  }
  return [];
}

/** A Converse answer as a neutral one; `id` and `model` are the call's (Converse's answer has neither). */
export function readConverseAnswer(body: JsonObject, id: string, model: string): Answer {
  const message = isObject(body.output) && isObject(body.output.message) ? body.output.message : {};
  const content = Array.isArray(message.content) ? message.content.flatMap(readBlock) : [];
  return {
    id,
    model,
    created: Math.floor(Date.now() / 1000),
    content,
    ...readStop(body.stopReason, body.additionalModelResponseFields),
    usage: readConverseUsage(body.usage),
  };
}
