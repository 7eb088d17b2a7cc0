import { errors } from '../../../errors/gateway-error.js';
import { isObject, type JsonObject } from '../../content.js';
import { EFFORT_BUDGETS, invalid, untranslatable, type Message, type Part, type Request, type Tool, type ToolChoice } from '../neutral.js';
import {
  absent,
  any,
  argumentsObject,
  omit,
  optionalNumber,
  readEffort,
  refuseUnknown,
  sortFields,
  type FieldRule,
  type FieldRules,
  type ReadRequest,
} from '../wire-format.js';

const NAME = 'Messages';

/** The output limit sent when the client gave none: Messages requires one. */
export const DEFAULT_MAX_TOKENS = 4096;

const refused = (note: string): FieldRule => ({ class: 'refused', note });

/** The fields of a Messages body and their classes (docs/TRANSLATION.md); any other is refused by name. */
export const MESSAGES_REQUEST_FIELDS: FieldRules = {
  model: { class: 'carried', note: "the upstream's name for the catalog model" },
  messages: { class: 'carried', note: 'text, images, PDFs, tool uses and results; thinking given back is left out to another model (`thinking` omitted)' },
  system: { class: 'carried', note: 'a system message' },
  max_tokens: { class: 'carried', note: '`max_completion_tokens`, `max_output_tokens`' },
  stream: { class: 'carried', note: "events in the client's format" },
  stop_sequences: { class: { 'Chat Completions': 'carried', Responses: 'refused' }, note: "Chat Completions' `stop`; Responses has none" },
  temperature: { class: 'carried', note: 'the same scale, which OpenAI extends to 2' },
  top_p: { class: 'carried', note: '' },
  tools: { class: 'carried', note: "custom tools, `strict` included; `cache_control` omitted, Anthropic's own tools refused" },
  tool_choice: { class: 'carried', note: '`any` as `required`; `disable_parallel_tool_use` as `parallel_tool_calls: false`' },
  thinking: { class: 'carried', note: "a budget as an effort (the efforts' table); `adaptive` as the model's default effort" },
  output_config: { class: 'carried', note: '`format` as a JSON schema answer, `effort` as the effort' },
  output_format: { class: 'carried', note: "the beta API's earlier `output_config.format`" },
  metadata: { class: 'carried', note: '`user_id` as `user`' },
  service_tier: { class: 'carried', note: '`auto` as `auto`, `standard_only` as `default`' },
  cache_control: {
    class: 'omitted',
    note: "a caching hint: OpenAI caches a prompt's prefix by itself; at any level, blocks and tools too (and a text block's `citations` given back, omitted by that name)",
  },
  top_k: refused('OpenAI has no top-k sampling'),
  container: refused("Anthropic's code execution container"),
  mcp_servers: refused("Anthropic's own MCP connector"),
  context_management: refused("Anthropic's context editing"),
  diagnostics: refused("Anthropic's diagnostics"),
  inference_geo: refused("Anthropic's regions"),
  speed: refused("Anthropic's fast mode"),
  user_profile_id: refused("Anthropic's user profiles"),
  workspace_id: refused("Anthropic's workspaces"),
};

function source(block: JsonObject, at: string, target: string): { url: string } | { mediaType: string; data: string } {
  const { source } = block;
  if (isObject(source) && source.type === 'base64' && typeof source.media_type === 'string' && typeof source.data === 'string') {
    return { mediaType: source.media_type, data: source.data };
  }
  if (isObject(source) && source.type === 'url' && typeof source.url === 'string') return { url: source.url };
  // A stored file not yet inlined (the handler's first look): its bytes arrive before the call.
  if (isObject(source) && source.type === 'file') return { mediaType: 'application/pdf', data: '' };
  throw untranslatable(`${at}.source.type`, target);
}

// Caching hints change the price, never the answer: omitted, by name, since OpenAI caches a
// prompt's prefix by itself (docs/TRANSLATION.md).
const BLOCK_FIELDS = { type: any, cache_control: any };

/**
 * The hints of `blocks` (and of the tool results among them), added to `omitted`: `cache_control`,
 * and the citations of a text block given back, which were for the client's eyes.
 */
function blockHints(blocks: unknown, omitted: string[]): void {
  if (!Array.isArray(blocks)) return;
  for (const block of blocks) {
    if (!isObject(block)) continue;
    if (!absent(block.cache_control)) omit(omitted, 'cache_control');
    if (block.type === 'text' && Array.isArray(block.citations) && block.citations.length > 0) omit(omitted, 'citations');
    blockHints(block.content, omitted);
  }
}

/**
 * The betas (`anthropic-beta`) whose effect a translated call keeps: those that only enable what
 * is translated anyway. Any other changes what Anthropic does, which another format cannot.
 */
export const TRANSLATED_BETAS: ReadonlySet<string> = new Set([
  // Stored files in document blocks: the gateway inlines them before the call.
  'files-api-2025-04-14',
  // PDF document blocks, since generally available: translated as files.
  'pdfs-2024-09-25',
  // cache_control, since generally available: a hint carried over as nothing (above).
  'prompt-caching-2024-07-31',
  // Tool input streamed unbuffered: other formats stream arguments in pieces anyway.
  'fine-grained-tool-streaming-2025-05-14',
  // Sent by @anthropic-ai/sdk's beta.messages.countTokens() itself: a count is estimated anyway.
  'token-counting-2024-11-01',
  // Structured outputs, since generally available: translated as a JSON schema answer
  // (beta.messages.parse() sends the second by itself).
  'structured-outputs-2025-11-13',
  'structured-outputs-2025-12-15',
]);

/**
 * The betas that enable a feature a translated call does not use: left out, and named in
 * `x-kmg-omitted`. Thinking between tool calls and a larger context are the provider model's own.
 */
export const OMITTED_BETAS: ReadonlySet<string> = new Set(['interleaved-thinking-2025-05-14', 'context-1m-2025-08-07', 'token-efficient-tools-2025-02-19']);

/**
 * Refuses (400, naming the header and the value) a beta of `anthropic-beta` that a translated call
 * would not have; answers those it leaves out (`OMITTED_BETAS`), as `anthropic-beta:<value>`.
 */
export function refuseBetas(headers: Readonly<Record<string, string>>, target: string): string[] {
  const omitted: string[] = [];
  for (const beta of (headers['anthropic-beta'] ?? '').split(',')) {
    const name = beta.trim();
    if (name === '' || TRANSLATED_BETAS.has(name)) continue;
    if (!OMITTED_BETAS.has(name)) throw untranslatable(`anthropic-beta: ${name}`, target);
    omit(omitted, `anthropic-beta:${name}`);
  }
  return omitted;
}

function readBlock(block: unknown, at: string, target: string): Part {
  if (!isObject(block)) throw invalid(at, 'must be an object');
  const fields = (known: Record<string, (value: unknown) => boolean>) => refuseUnknown(block, { ...BLOCK_FIELDS, ...known }, target, `${at}.`);
  switch (block.type) {
    case 'text':
      fields({ text: any, citations: (value) => absent(value) || Array.isArray(value) });
      if (typeof block.text !== 'string') throw invalid(`${at}.text`, 'must be a string');
      return { type: 'text', text: block.text };
    case 'image':
      fields({ source: any });
      return { type: 'image', source: source(block, at, target) };
    case 'document': {
      fields({ source: any, title: any, context: absent, citations: absent });
      const from = source(block, at, target);
      if (!('data' in from)) throw untranslatable(`${at}.source.type`, target);
      // A PDF is the one document Anthropic takes as bytes: anything else would reach the provider as one.
      if (from.mediaType !== 'application/pdf') throw untranslatable(`${at}.source.media_type`, target);
      return { type: 'file', ...from, ...(typeof block.title === 'string' && { filename: block.title }) };
    }
    case 'tool_use':
      // caller: who called the tool, as answers say it; the model itself is the one a translated call has.
      fields({ id: any, name: any, input: any, caller: (value) => absent(value) || (isObject(value) && value.type === 'direct') });
      if (typeof block.id !== 'string' || typeof block.name !== 'string') throw invalid(at, 'must have a string id and name');
      return { type: 'tool-call', id: block.id, name: block.name, input: JSON.stringify(block.input ?? {}) };
    case 'tool_result': {
      fields({ tool_use_id: any, content: any, is_error: any });
      if (typeof block.tool_use_id !== 'string') throw invalid(`${at}.tool_use_id`, 'must be a string');
      if (block.content != null && typeof block.content !== 'string' && !Array.isArray(block.content))
        throw invalid(`${at}.content`, 'must be a string or an array');
      const content =
        typeof block.content === 'string'
          ? [{ type: 'text' as const, text: block.content }]
          : Array.isArray(block.content)
            ? block.content.map((inner, index) => readBlock(inner, `${at}.content[${index}]`, target))
            : [];
      return { type: 'tool-result', callId: block.tool_use_id, content, ...(block.is_error === true && { isError: true }) };
    }
    case 'thinking':
      fields({ thinking: any, signature: any });
      return { type: 'reasoning', text: String(block.thinking ?? ''), ...(typeof block.signature === 'string' && { signature: block.signature }) };
    case 'redacted_thinking':
      fields({ data: any });
      return { type: 'redacted-reasoning', data: String(block.data ?? '') };
    default:
      throw untranslatable(`${at}.type`, target);
  }
}

function readContent(content: unknown, at: string, target: string): Part[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw invalid(at, 'must be a string or an array of content blocks');
  return content.map((block, index) => readBlock(block, `${at}[${index}]`, target));
}

function readSystem(system: unknown, target: string): string[] {
  if (absent(system)) return [];
  if (typeof system === 'string') return [system];
  return readContent(system, 'system', target).map((part) => {
    if (part.type !== 'text') throw untranslatable('system', target);
    return part.text;
  });
}

function readTools(tools: unknown, target: string): Tool[] {
  if (absent(tools)) return [];
  if (!Array.isArray(tools)) throw invalid('tools', 'must be an array');
  return tools.map((tool, index): Tool => {
    const at = `tools[${index}]`;
    if (!isObject(tool)) throw invalid(at, 'must be an object');
    // Anthropic's own tools (web search, code execution...) have a type; a custom tool none, or "custom".
    // Fine-grained streaming of the input is a hint: Chat Completions streams arguments in pieces anyway.
    refuseUnknown(
      tool,
      {
        name: any,
        description: any,
        input_schema: any,
        type: (value) => absent(value) || value === 'custom',
        cache_control: any,
        eager_input_streaming: any,
        strict: any,
        // Called by the model itself, the one caller a translated call has.
        allowed_callers: (value) => absent(value) || (Array.isArray(value) && value.every((caller) => caller === 'direct')),
      },
      target,
      `${at}.`,
    );
    if (typeof tool.name !== 'string') throw invalid(`${at}.name`, 'must be a string');
    return {
      name: tool.name,
      ...(typeof tool.description === 'string' && { description: tool.description }),
      parameters: isObject(tool.input_schema) ? tool.input_schema : { type: 'object', properties: {} },
      ...(tool.strict === true && { strict: true }),
    };
  });
}

function readToolChoice(choice: unknown, target: string): { toolChoice?: ToolChoice; parallelToolCalls?: boolean } {
  if (absent(choice)) return {};
  if (!isObject(choice)) throw invalid('tool_choice', 'must be an object');
  const disable = choice.disable_parallel_tool_use;
  if (disable !== undefined && typeof disable !== 'boolean') throw invalid('tool_choice.disable_parallel_tool_use', 'must be a boolean');
  const parallel = choice.disable_parallel_tool_use === true ? { parallelToolCalls: false } : {};
  switch (choice.type) {
    case 'auto':
      return { toolChoice: { type: 'auto' }, ...parallel };
    case 'any':
      return { toolChoice: { type: 'required' }, ...parallel };
    case 'none':
      return { toolChoice: { type: 'none' } };
    case 'tool':
      if (typeof choice.name !== 'string') throw invalid('tool_choice.name', 'must be a string');
      return { toolChoice: { type: 'tool', name: choice.name }, ...parallel };
    default:
      throw untranslatable('tool_choice.type', target);
  }
}

/** Thinking, with the effort of `output_config.effort`, which takes precedence as the OpenAI formats' own measure. */
function readThinking(thinking: unknown, effort: unknown, target: string): Request['reasoning'] {
  const named = readEffort(effort, 'output_config.effort');
  if (absent(thinking) || (isObject(thinking) && thinking.type === 'disabled')) return named;
  if (isObject(thinking) && thinking.type === 'enabled' && typeof thinking.budget_tokens === 'number') return named ?? { budgetTokens: thinking.budget_tokens };
  if (isObject(thinking) && thinking.type === 'adaptive') return named ?? { adaptive: true };
  throw untranslatable('thinking', target);
}

/**
 * Structured outputs (`output_config.format`): a JSON schema the answer follows, strictly, as
 * Anthropic always does; named `response` where the provider's format wants a name.
 */
function readOutputConfig(body: JsonObject, target: string): Request['responseFormat'] {
  const config = body.output_config;
  if (!absent(config) && !isObject(config)) throw invalid('output_config', 'must be an object');
  if (isObject(config)) refuseUnknown(config, { format: any, effort: any }, target, 'output_config.');
  // The beta API's earlier place for it, which @anthropic-ai/sdk's beta.messages.parse() fills.
  const [format, param] = isObject(config) && !absent(config.format) ? [config.format, 'output_config.format'] : [body.output_format, 'output_format'];
  if (absent(format)) return undefined;
  if (!isObject(format) || format.type !== 'json_schema' || !isObject(format.schema)) throw untranslatable(param, target);
  refuseUnknown(format, { type: any, schema: any }, target, `${param}.`);
  return { type: 'json-schema', name: 'response', schema: format.schema, strict: true };
}

/** A Messages body, read; `target` names the provider's format in refusals. */
export function readMessagesRequest(body: JsonObject, target: string): ReadRequest {
  const omitted: string[] = [];
  sortFields(body, MESSAGES_REQUEST_FIELDS, target, omitted);
  if (!Array.isArray(body.messages)) throw invalid('messages', 'must be an array');
  for (const blocks of [body.system, body.tools, ...body.messages.map((message) => (isObject(message) ? message.content : undefined))])
    blockHints(blocks, omitted);
  const messages: Message[] = body.messages.map((message, index) => {
    const at = `messages[${index}]`;
    if (!isObject(message) || (message.role !== 'user' && message.role !== 'assistant')) throw invalid(`${at}.role`, "must be 'user' or 'assistant'");
    refuseUnknown(message, { role: any, content: any }, target, `${at}.`);
    return { role: message.role, parts: readContent(message.content, `${at}.content`, target) };
  });
  if (body.metadata != null && !isObject(body.metadata)) throw invalid('metadata', 'must be an object');
  const metadata = isObject(body.metadata) ? body.metadata : {};
  refuseUnknown(metadata, { user_id: any }, target, 'metadata.');
  const stop = body.stop_sequences;
  if (!absent(stop) && (!Array.isArray(stop) || !stop.every((item) => typeof item === 'string')))
    throw invalid('stop_sequences', 'must be an array of strings');
  const maxTokens = optionalNumber(body, 'max_tokens');
  const temperature = optionalNumber(body, 'temperature');
  const topP = optionalNumber(body, 'top_p');
  const reasoning = readThinking(body.thinking, isObject(body.output_config) ? body.output_config.effort : undefined, target);
  const serviceTier = readServiceTier(body.service_tier);
  const responseFormat = readOutputConfig(body, target);
  return {
    model: String(body.model),
    stream: body.stream === true,
    system: readSystem(body.system, target),
    messages,
    tools: readTools(body.tools, target),
    ...readToolChoice(body.tool_choice, target),
    ...(maxTokens !== undefined && { maxTokens }),
    ...(temperature !== undefined && { temperature }),
    ...(topP !== undefined && { topP }),
    ...(Array.isArray(stop) && stop.length > 0 && { stop: stop as string[] }),
    ...(reasoning && { reasoning }),
    ...(responseFormat && { responseFormat }),
    ...(typeof metadata.user_id === 'string' && { user: metadata.user_id }),
    ...(serviceTier !== undefined && { serviceTier }),
    omitted,
    params: {
      maxTokens: 'max_tokens',
      temperature: 'temperature',
      topP: 'top_p',
      stop: 'stop_sequences',
      toolChoice: 'tool_choice',
      parallelToolCalls: 'tool_choice.disable_parallel_tool_use',
      reasoning: 'thinking',
      responseFormat: 'output_config.format',
      user: 'metadata.user_id',
      serviceTier: 'service_tier',
      messages: 'messages',
    },
  };
}

function writeSource(source: { url: string } | { mediaType: string; data: string }): JsonObject {
  return 'url' in source ? { type: 'url', url: source.url } : { type: 'base64', media_type: source.mediaType, data: source.data };
}

function writeBlock(part: Part, request: ReadRequest): JsonObject {
  const where = request.params.messages ?? 'messages';
  switch (part.type) {
    case 'text':
      return { type: 'text', text: part.text };
    case 'image':
      return { type: 'image', source: writeSource(part.source) };
    case 'file':
      if (part.mediaType !== 'application/pdf') throw untranslatable(`${where} (a ${part.mediaType} file)`, NAME);
      return { type: 'document', source: writeSource(part), ...(part.filename !== undefined && { title: part.filename }) };
    case 'tool-call':
      return { type: 'tool_use', id: part.id, name: part.name, input: argumentsObject(part.input) };
    case 'tool-result':
      return {
        type: 'tool_result',
        tool_use_id: part.callId,
        content: part.content.map((inner) => writeBlock(inner, request)),
        ...(part.isError && { is_error: true }),
      };
    case 'reasoning':
      return { type: 'thinking', thinking: part.text, signature: part.signature ?? '' };
    case 'redacted-reasoning':
      return { type: 'redacted_thinking', data: part.data };
  }
}

function writeMessages(request: ReadRequest): JsonObject[] {
  const written: Array<{ role: string; content: JsonObject[] }> = [];
  for (const message of request.messages) {
    // Tool results first in their turn, as Messages wants them; empty texts are refused upstream.
    const parts = [...message.parts.filter((part) => part.type === 'tool-result'), ...message.parts.filter((part) => part.type !== 'tool-result')];
    // Thinking goes back only with the signature Anthropic gave it: another model's is left out, named.
    if (parts.some((part) => part.type === 'reasoning' && !signed(part))) omit(request.omitted, 'thinking');
    const blocks = parts
      .filter((part) => (part.type !== 'text' || part.text !== '') && (part.type !== 'reasoning' || signed(part)))
      .map((part) => writeBlock(part, request));
    if (blocks.length === 0) continue;
    const last = written.at(-1);
    if (last?.role === message.role) last.content.push(...blocks);
    else written.push({ role: message.role, content: blocks });
  }
  return written;
}

function writeToolChoice(request: ReadRequest): JsonObject | undefined {
  const { toolChoice, parallelToolCalls } = request;
  // Messages refuses a tool_choice without tools.
  if (request.tools.length === 0) return undefined;
  const once = parallelToolCalls === false ? { disable_parallel_tool_use: true } : {};
  if (toolChoice === undefined) return parallelToolCalls === false ? { type: 'auto', ...once } : undefined;
  switch (toolChoice.type) {
    case 'auto':
      return { type: 'auto', ...once };
    case 'required':
      return { type: 'any', ...once };
    case 'none':
      return { type: 'none' };
    case 'tool':
      return { type: 'tool', name: toolChoice.name, ...once };
  }
}

/** Messages' service tiers by OpenAI's names, both ways: the values both have. */
const SERVICE_TIERS = [
  ['auto', 'auto'],
  ['default', 'standard_only'],
] as const;

function readServiceTier(tier: unknown): string | undefined {
  if (absent(tier)) return undefined;
  const openAI = SERVICE_TIERS.find(([, messages]) => messages === tier)?.[0];
  if (openAI === undefined) throw invalid('service_tier', "must be 'auto' or 'standard_only'");
  return openAI;
}
/** Whether a part is thinking Anthropic signed (redacted thinking is, by its data). */
const signed = (part: Part) => (part.type === 'reasoning' && part.signature !== undefined && part.signature !== '') || part.type === 'redacted-reasoning';

/** Whether the last assistant turn called tools without the signed thinking that came before the calls. */
function unsignedToolTurn(request: ReadRequest): boolean {
  const last = request.messages.findLast((message) => message.role === 'assistant');
  return last !== undefined && last.parts.some((part) => part.type === 'tool-call') && !last.parts.some(signed);
}

/** The least thinking budget Messages takes. */
const MIN_THINKING_BUDGET = 1024;

/**
 * The thinking budget of `request` as Messages takes it, below `max_tokens` and at least 1,024
 * tokens (an effort's budget is lowered to fit the client's max tokens), and what may not go with
 * thinking refused, naming the client's parameters: a temperature other than 1, a `top_p` below
 * 0.95, a forced tool. Undefined without reasoning.
 */
function thinkingBudget(request: ReadRequest): number | undefined {
  const { reasoning, params } = request;
  const effort = reasoning?.effort;
  const wanted = reasoning?.budgetTokens ?? (effort === undefined || effort === 'none' ? undefined : EFFORT_BUDGETS[effort]);
  if (wanted === undefined) return undefined;
  // Amid a tool loop Anthropic thinks only after its own signed thinking, which a format without a
  // place for it could not give back: this turn goes without, named, rather than refused upstream.
  if (unsignedToolTurn(request)) {
    omit(request.omitted, params.reasoning ?? 'reasoning');
    return undefined;
  }
  const withReasoning = (param: string | undefined, fallback: string, why: string) =>
    errors.invalidRequest(`'${param ?? fallback}' cannot be sent to this model with '${params.reasoning ?? 'reasoning'}': ${why}`);
  if (request.temperature !== undefined && request.temperature !== 1)
    throw withReasoning(params.temperature, 'temperature', 'its provider thinks at temperature 1 only');
  if (request.topP !== undefined && request.topP < 0.95) throw withReasoning(params.topP, 'top_p', 'its provider thinks with a top_p of 0.95 to 1 only');
  const forced = request.toolChoice?.type === 'required' || request.toolChoice?.type === 'tool';
  if (forced && request.tools.length > 0) throw withReasoning(params.toolChoice, 'tool_choice', 'its provider cannot be made to call a tool while it thinks');
  if (request.maxTokens === undefined) return wanted;
  const budget = Math.min(wanted, request.maxTokens - 1);
  if (budget < MIN_THINKING_BUDGET)
    throw withReasoning(params.maxTokens, 'max_tokens', `its provider thinks with at least ${MIN_THINKING_BUDGET} tokens, and answers in more`);
  return budget;
}

/** The service tier of `request` by Messages' name; refused by the client's name when Messages has no such tier. */
function writeServiceTier(request: ReadRequest): string | undefined {
  const { serviceTier } = request;
  if (serviceTier === undefined) return undefined;
  const tier = SERVICE_TIERS.find(([openAI]) => openAI === serviceTier)?.[1];
  if (tier === undefined) throw untranslatable(`${request.params.serviceTier ?? 'service_tier'} ${serviceTier}`, NAME);
  return tier;
}

/**
 * The conversation as Messages takes it: one of only system instructions (nothing for the model
 * to answer, which Messages refuses) sends their text as its user turn, the documented way.
 */
function conversation(request: ReadRequest): { system?: string; messages: JsonObject[] } {
  const messages = writeMessages(request);
  const system = request.system.join('\n\n');
  if (messages.length > 0) return { ...(system !== '' && { system }), messages };
  if (system === '') throw invalid(request.params.messages ?? 'messages', 'must hold a user turn with content');
  return { messages: [{ role: 'user', content: [{ type: 'text', text: system }] }] };
}

/**
 * A neutral request as a Messages body: `max_tokens` 4,096 (above the thinking budget, if any)
 * when the client gave none (Messages requires it), consecutive turns of one role merged, tool results first in their turn, an
 * effort as a thinking budget (`EFFORT_BUDGETS`, lowered below the client's max tokens;
 * `thinkingBudget` refuses what cannot go with it), a JSON schema as structured outputs
 * (`output_config.format`, which Anthropic always follows strictly; the schema's name, a label, has
 * no place there), a conversation of only instructions as its user turn. Messages has no JSON mode
 * without a schema, and its temperature stops at 1 (above it refused, not scaled: docs/DECISIONS.md).
 */
export function writeMessagesRequest(request: ReadRequest): JsonObject {
  const { params, responseFormat } = request;
  if (responseFormat?.type === 'json') throw untranslatable(`${params.responseFormat ?? 'response_format'} json_object`, NAME);
  if (request.temperature !== undefined && request.temperature > 1) {
    throw untranslatable(`${params.temperature ?? 'temperature'} above 1`, NAME);
  }
  const budget = thinkingBudget(request);
  const toolChoice = writeToolChoice(request);
  const serviceTier = writeServiceTier(request);
  return {
    model: request.model,
    max_tokens: request.maxTokens ?? DEFAULT_MAX_TOKENS + (budget ?? 0),
    ...conversation(request),
    ...(request.tools.length > 0 && {
      tools: request.tools.map((tool) => ({
        name: tool.name,
        ...(tool.description !== undefined && { description: tool.description }),
        input_schema: tool.parameters,
        ...(tool.strict && { strict: true }),
      })),
    }),
    ...(toolChoice && { tool_choice: toolChoice }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...(request.stop && { stop_sequences: request.stop }),
    ...(budget !== undefined && { thinking: { type: 'enabled', budget_tokens: budget } }),
    ...(responseFormat && { output_config: { format: { type: 'json_schema', schema: responseFormat.schema } } }),
    ...(request.user !== undefined && { metadata: { user_id: request.user } }),
    ...(serviceTier !== undefined && { service_tier: serviceTier }),
    ...(request.stream && { stream: true }),
  };
}
