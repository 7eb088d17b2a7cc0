import { isObject, type JsonObject } from '../../content.js';
import { effortOf, invalid, untranslatable, type Message, type Part, type Tool, type ToolChoice } from '../neutral.js';
import {
  absent,
  any,
  dataUrl,
  defaultOnly,
  omit,
  optionalBoolean,
  optionalNumber,
  optionalString,
  parseDataUrl,
  readEffort,
  readEndUser,
  refuseUnknown,
  sortFields,
  type FieldRule,
  type FieldRules,
  type ReadRequest,
} from '../wire-format.js';

const NAME = 'Chat Completions';

const refused = (note: string, inert?: (value: unknown) => boolean): FieldRule => ({ class: 'refused', note, ...(inert && { inert }) });
/** OpenAI's hints Messages has no place for: carried to Responses as they are, left out to Messages. */
const openAIHint = (note: string): FieldRule => ({ class: { Responses: 'carried', Messages: 'omitted' }, note });

/** The fields of a Chat Completions body and their classes (docs/TRANSLATION.md); any other is refused by name. */
export const CHAT_REQUEST_FIELDS: FieldRules = {
  model: { class: 'carried', note: "the upstream's name for the catalog model" },
  messages: {
    class: { Responses: 'carried', Messages: 'validated' },
    note: 'system and developer messages as the system prompt; to Messages, a conversation of only those sends their text as its user turn',
  },
  stream: { class: 'carried', note: "events in the client's format" },
  stream_options: { class: 'carried', note: 'usage always asked for upstream; given to the client as it asked' },
  tools: { class: 'carried', note: 'function tools, `strict` included' },
  tool_choice: { class: 'carried', note: "`required` as Messages' `any`" },
  parallel_tool_calls: { class: 'carried', note: "`false` as Messages' `disable_parallel_tool_use`" },
  max_tokens: { class: 'carried', note: 'the output limit' },
  max_completion_tokens: { class: 'carried', note: 'the output limit' },
  temperature: { class: { Responses: 'carried', Messages: 'validated' }, note: "Messages' range is 0 to 1: above it refused" },
  top_p: { class: 'carried', note: '' },
  stop: { class: { Messages: 'carried', Responses: 'refused' }, note: "Messages' `stop_sequences`; Responses has none" },
  response_format: {
    class: 'carried',
    note: "a JSON schema as Messages' `output_config.format`; `json_object` refused to Messages, which has no JSON mode without a schema",
  },
  reasoning_effort: { class: 'carried', note: "to Messages, a thinking budget (the efforts' table); `none` no thinking" },
  user: { class: 'carried', note: "Messages' `metadata.user_id` when `safety_identifier` is not set (then omitted)" },
  safety_identifier: { class: 'carried', note: "Messages' `metadata.user_id`" },
  service_tier: { class: 'carried', note: 'to Messages `auto` as `auto`, `default` as `standard_only`; another tier refused' },
  metadata: openAIHint("OpenAI's tags for stored completions"),
  prompt_cache_key: openAIHint('a caching hint'),
  prompt_cache_retention: openAIHint('a caching hint'),
  prompt_cache_options: openAIHint('a caching hint'),
  store: { class: 'omitted', inert: (value) => value === false, note: 'a translated call is never stored' },
  n: refused('one answer per call', (value) => value === 1),
  logprobs: refused('no other format gives them', (value) => value === false),
  top_logprobs: refused('no other format gives them'),
  frequency_penalty: refused('no other format has it', (value) => value === 0),
  presence_penalty: refused('no other format has it', (value) => value === 0),
  logit_bias: refused('no other format has it'),
  seed: refused('no other format has it'),
  audio: refused('audio answers'),
  modalities: refused('audio answers', (value) => Array.isArray(value) && value.length === 1 && value[0] === 'text'),
  prediction: refused('predicted outputs'),
  verbosity: { class: { Responses: 'carried', Messages: 'refused' }, note: "Responses' `text.verbosity`; Messages has none" },
  web_search_options: refused("OpenAI's own web search"),
  functions: refused('the deprecated form of `tools`'),
  function_call: refused('the deprecated form of `tool_choice`'),
  moderation: refused("OpenAI's own moderation"),
};

/**
 * The fields of a message and their classes. What the gateway answers and the SDKs' helpers add
 * to a message they hand back (`annotations`, `parsed`, `refusal: null`...) is accepted back.
 */
export const CHAT_MESSAGE_FIELDS: FieldRules = {
  role: { class: 'carried', note: '' },
  content: { class: 'carried', note: 'text, images and PDFs' },
  tool_calls: { class: 'carried', note: "each function's `parsed_arguments`, the openai SDK's parse of its arguments, carried as the arguments it repeats" },
  tool_call_id: { class: 'carried', note: '' },
  refusal: { class: 'carried', note: 'as text of the assistant turn' },
  thinking_blocks: {
    class: 'carried',
    note: "Claude's thinking with its signature, as the gateway answered it: back to Messages as thinking blocks (to Responses omitted, named `thinking`)",
  },
  reasoning_content: { class: 'carried', inert: () => true, note: 'the text of `thinking_blocks`: carried as the blocks it repeats' },
  parsed: { class: 'carried', inert: () => true, note: "the openai SDK's parse of `content`: carried as the content it repeats" },
  annotations: {
    class: 'omitted',
    inert: (value) => Array.isArray(value) && value.length === 0,
    note: "citations of an earlier answer, for the client's eyes",
  },
  name: refused("a participant's name"),
  audio: refused('an earlier audio answer'),
  function_call: refused('the deprecated form of `tool_calls`'),
};

function textParts(content: unknown, param: string, target: string): Part[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw invalid(param, 'must be a string or an array of content parts');
  return content.map((part, index) => {
    const at = `${param}[${index}]`;
    if (!isObject(part) || (part.type !== 'text' && part.type !== 'refusal')) throw untranslatable(`${at}.type`, target);
    const text = part.type === 'text' ? part.text : part.refusal;
    if (typeof text !== 'string') throw invalid(`${at}.text`, 'must be a string');
    return { type: 'text', text };
  });
}

function userParts(content: unknown, param: string, target: string): Part[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw invalid(param, 'must be a string or an array of content parts');
  return content.map((part, index): Part => {
    const at = `${param}[${index}]`;
    if (!isObject(part)) throw invalid(at, 'must be an object');
    if (part.type === 'text' && typeof part.text === 'string') return { type: 'text', text: part.text };
    if (part.type === 'image_url' && isObject(part.image_url) && typeof part.image_url.url === 'string') {
      // Only OpenAI picks an image's resolution.
      refuseUnknown(part.image_url, { url: any, detail: defaultOnly('auto') }, target, `${at}.image_url.`);
      const inline = parseDataUrl(part.image_url.url);
      return { type: 'image', source: inline ?? { url: part.image_url.url } };
    }
    if (part.type === 'file' && isObject(part.file)) {
      const { file } = part;
      const filename = typeof file.filename === 'string' ? { filename: file.filename } : {};
      // A stored file not yet inlined (the handler's first look): its bytes arrive before the call.
      if (typeof file.file_id === 'string') return { type: 'file', mediaType: 'application/pdf', data: '', ...filename };
      const inline = typeof file.file_data === 'string' ? parseDataUrl(file.file_data) : undefined;
      if (inline === undefined) throw invalid(`${at}.file.file_data`, 'must be a base64 data URL');
      return { type: 'file', ...inline, ...filename };
    }
    throw untranslatable(`${at}.type`, target);
  });
}

function toolCalls(calls: unknown, param: string, target: string): Part[] {
  if (absent(calls)) return [];
  if (!Array.isArray(calls)) throw invalid(param, 'must be an array');
  return calls.map((call, index): Part => {
    const at = `${param}[${index}]`;
    if (!isObject(call) || call.type !== 'function' || !isObject(call.function)) throw untranslatable(`${at}.type`, target);
    // parsed_arguments: the openai SDK's parse of the arguments, which they carry.
    refuseUnknown(call.function, { name: any, arguments: any, parsed_arguments: any }, target, `${at}.function.`);
    const { id } = call;
    const { name, arguments: input } = call.function;
    if (typeof id !== 'string' || typeof name !== 'string' || typeof input !== 'string') {
      throw invalid(at, 'must have a string id, function.name and function.arguments');
    }
    return { type: 'tool-call', id, name, input };
  });
}

/** The thinking an answer of the gateway gave (`thinking_blocks`, `thinkingFields()`), given back. */
function thinkingParts(blocks: unknown, param: string): Part[] {
  if (absent(blocks)) return [];
  if (!Array.isArray(blocks)) throw invalid(param, 'must be an array');
  return blocks.map((block, index): Part => {
    if (isObject(block) && block.type === 'thinking' && typeof block.thinking === 'string' && typeof block.signature === 'string') {
      return { type: 'reasoning', text: block.thinking, signature: block.signature };
    }
    if (isObject(block) && block.type === 'redacted_thinking' && typeof block.data === 'string') return { type: 'redacted-reasoning', data: block.data };
    throw invalid(`${param}[${index}]`, 'must be a thinking block (type, thinking, signature) or a redacted_thinking block (type, data)');
  });
}

/** The messages: system and developer ones become the system prompt; tool results join the user turn that follows. */
function readMessages(messages: unknown, target: string, omitted: string[]): { system: string[]; messages: Message[] } {
  if (!Array.isArray(messages)) throw invalid('messages', 'must be an array');
  const system: string[] = [];
  const read: Message[] = [];
  const add = (role: Message['role'], parts: Part[]) => {
    const last = read.at(-1);
    if (last?.role === role) last.parts.push(...parts);
    else read.push({ role, parts });
  };
  messages.forEach((message, index) => {
    const at = `messages[${index}]`;
    if (!isObject(message)) throw invalid(at, 'must be an object');
    sortFields(message, CHAT_MESSAGE_FIELDS, target, omitted, `${at}.`);
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(
          textParts(message.content, `${at}.content`, target)
            .map((part) => (part.type === 'text' ? part.text : ''))
            .join('\n'),
        );
        return;
      case 'user':
        add('user', userParts(message.content, `${at}.content`, target));
        return;
      case 'assistant': {
        const parts = [
          ...thinkingParts(message.thinking_blocks, `${at}.thinking_blocks`),
          ...(absent(message.content) ? [] : textParts(message.content, `${at}.content`, target)),
        ];
        if (typeof message.refusal === 'string' && message.refusal !== '') parts.push({ type: 'text', text: message.refusal });
        add('assistant', [...parts, ...toolCalls(message.tool_calls, `${at}.tool_calls`, target)]);
        return;
      }
      case 'tool': {
        if (typeof message.tool_call_id !== 'string') throw invalid(`${at}.tool_call_id`, 'must be a string');
        add('user', [{ type: 'tool-result', callId: message.tool_call_id, content: textParts(message.content, `${at}.content`, target) }]);
        return;
      }
      default:
        throw untranslatable(`${at}.role`, target);
    }
  });
  return { system, messages: read };
}

function readTools(tools: unknown, target: string): Tool[] {
  if (absent(tools)) return [];
  if (!Array.isArray(tools)) throw invalid('tools', 'must be an array');
  return tools.map((tool, index): Tool => {
    const at = `tools[${index}]`;
    if (!isObject(tool) || tool.type !== 'function' || !isObject(tool.function)) throw untranslatable(`${at}.type`, target);
    const { name, description, parameters, strict } = tool.function;
    if (typeof name !== 'string') throw invalid(`${at}.function.name`, 'must be a string');
    return {
      name,
      ...(typeof description === 'string' && { description }),
      parameters: isObject(parameters) ? parameters : { type: 'object', properties: {} },
      ...(strict === true && { strict: true }),
    };
  });
}

function readToolChoice(choice: unknown, target: string): ToolChoice | undefined {
  if (absent(choice)) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return { type: choice };
  if (isObject(choice) && choice.type === 'function' && isObject(choice.function) && typeof choice.function.name === 'string') {
    return { type: 'tool', name: choice.function.name };
  }
  throw untranslatable('tool_choice', target);
}

function readResponseFormat(format: unknown, target: string): ReadRequest['responseFormat'] {
  if (absent(format) || (isObject(format) && format.type === 'text')) return undefined;
  if (isObject(format) && format.type === 'json_object') return { type: 'json' };
  if (isObject(format) && format.type === 'json_schema' && isObject(format.json_schema) && isObject(format.json_schema.schema)) {
    const { name, schema, strict } = format.json_schema;
    return { type: 'json-schema', name: typeof name === 'string' ? name : 'response', schema, ...(typeof strict === 'boolean' && { strict }) };
  }
  throw untranslatable('response_format', target);
}

function readStop(stop: unknown): string[] | undefined {
  if (absent(stop)) return undefined;
  const list = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(list) || !list.every((item) => typeof item === 'string')) throw invalid('stop', 'must be a string or an array of strings');
  return list;
}

/** A Chat Completions body, read; `target` names the provider's format in refusals. */
export function readChatRequest(body: JsonObject, target: string): ReadRequest {
  const omitted: string[] = [];
  sortFields(body, CHAT_REQUEST_FIELDS, target, omitted);
  const { system, messages } = readMessages(body.messages, target, omitted);
  // OpenAI refuses the two together: one of them would otherwise be dropped.
  if (!absent(body.max_tokens) && !absent(body.max_completion_tokens)) throw invalid('max_tokens', "and 'max_completion_tokens' cannot both be set");
  // As OpenAI answers it: options of a stream not asked for would be dropped.
  if (!absent(body.stream_options) && body.stream !== true) throw invalid('stream_options', "is only allowed when 'stream' is true");
  const maxTokensParam = absent(body.max_completion_tokens) ? 'max_tokens' : 'max_completion_tokens';
  const maxTokens = optionalNumber(body, maxTokensParam);
  const temperature = optionalNumber(body, 'temperature');
  const topP = optionalNumber(body, 'top_p');
  const stop = readStop(body.stop);
  const toolChoice = readToolChoice(body.tool_choice, target);
  const responseFormat = readResponseFormat(body.response_format, target);
  const reasoning = readEffort(body.reasoning_effort, 'reasoning_effort');
  const serviceTier = optionalString(body, 'service_tier');
  const verbosity = optionalString(body, 'verbosity');
  const { user, openAI } = readEndUser(body, target, omitted);
  const parallelToolCalls = optionalBoolean(body, 'parallel_tool_calls');
  return {
    model: String(body.model),
    stream: body.stream === true,
    system,
    messages,
    tools: readTools(body.tools, target),
    ...(toolChoice && { toolChoice }),
    ...(parallelToolCalls !== undefined && { parallelToolCalls }),
    ...(maxTokens !== undefined && { maxTokens }),
    ...(temperature !== undefined && { temperature }),
    ...(topP !== undefined && { topP }),
    ...(stop && { stop }),
    ...(responseFormat && { responseFormat }),
    ...(reasoning && { reasoning }),
    ...(user !== undefined && { user }),
    ...(serviceTier !== undefined && { serviceTier }),
    ...(verbosity !== undefined && { verbosity }),
    ...(openAI && { openAI }),
    omitted,
    params: {
      maxTokens: maxTokensParam,
      temperature: 'temperature',
      topP: 'top_p',
      stop: 'stop',
      responseFormat: 'response_format',
      toolChoice: 'tool_choice',
      parallelToolCalls: 'parallel_tool_calls',
      user: 'user',
      serviceTier: 'service_tier',
      reasoning: 'reasoning_effort',
      messages: 'messages',
    },
  };
}

function contentParts(parts: Part[], request: ReadRequest): JsonObject[] {
  return parts.map((part): JsonObject => {
    switch (part.type) {
      case 'text':
        return { type: 'text', text: part.text };
      case 'image':
        return { type: 'image_url', image_url: { url: 'url' in part.source ? part.source.url : dataUrl(part.source.mediaType, part.source.data) } };
      case 'file':
        // A PDF is the one file Chat Completions reads.
        if (part.mediaType !== 'application/pdf') throw untranslatable(`${request.params.messages ?? 'messages'} (a ${part.mediaType} file)`, NAME);
        return { type: 'file', file: { filename: part.filename ?? 'document.pdf', file_data: dataUrl(part.mediaType, part.data) } };
      default:
        throw untranslatable(`${request.params.messages ?? 'messages'} (${part.type} content)`, NAME);
    }
  });
}

/** A tool result's text; one that reports the tool's failure says so, as the tool message has no flag for it. */
function toolResultText(part: Extract<Part, { type: 'tool-result' }>, request: ReadRequest): string {
  const text = part.content
    .map((inner) => {
      if (inner.type !== 'text') throw untranslatable(`${request.params.messages ?? 'messages'} (a tool result's ${inner.type} content)`, NAME);
      return inner.text;
    })
    .join('\n');
  return part.isError ? `Error: ${text}` : text;
}

function writeMessages(request: ReadRequest): JsonObject[] {
  const written: JsonObject[] = request.system.map((content) => ({ role: 'system', content }));
  for (const message of request.messages) {
    if (message.role === 'user') {
      // Tool results are messages of their own, before the rest of the turn.
      const rest: Part[] = [];
      for (const part of message.parts) {
        if (part.type === 'tool-result') written.push({ role: 'tool', tool_call_id: part.callId, content: toolResultText(part, request) });
        else rest.push(part);
      }
      if (rest.length > 0) written.push({ role: 'user', content: contentParts(rest, request) });
      continue;
    }
    let text = '';
    const calls: JsonObject[] = [];
    for (const part of message.parts) {
      if (part.type === 'text') text += part.text;
      else if (part.type === 'tool-call') calls.push({ id: part.id, type: 'function', function: { name: part.name, arguments: part.input } });
      // Another model's thinking, signed for it alone: the client keeps it for when the conversation goes back there.
      else if (part.type === 'reasoning' || part.type === 'redacted-reasoning') omit(request.omitted, 'thinking');
      else throw untranslatable(`${request.params.messages ?? 'messages'} (assistant ${part.type} content)`, NAME);
    }
    written.push({ role: 'assistant', content: text === '' && calls.length > 0 ? null : text, ...(calls.length > 0 && { tool_calls: calls }) });
  }
  return written;
}

function writeToolChoice(choice: ToolChoice): unknown {
  return choice.type === 'tool' ? { type: 'function', function: { name: choice.name } } : choice.type;
}

/**
 * A neutral request as a Chat Completions body: `max_completion_tokens` for the output limit, a
 * streamed call asking for usage, a thinking budget as a `reasoning_effort` (`effortOf()`).
 */
export function writeChatRequest(request: ReadRequest): JsonObject {
  const { responseFormat } = request;
  const effort = effortOf(request.reasoning);
  return {
    model: request.model,
    messages: writeMessages(request),
    ...(request.tools.length > 0 && {
      tools: request.tools.map((tool) => ({
        type: 'function',
        function: {
          name: tool.name,
          ...(tool.description !== undefined && { description: tool.description }),
          parameters: tool.parameters,
          ...(tool.strict && { strict: true }),
        },
      })),
    }),
    // Both are refused by OpenAI without tools.
    ...(request.tools.length > 0 && request.toolChoice && { tool_choice: writeToolChoice(request.toolChoice) }),
    ...(request.tools.length > 0 && request.parallelToolCalls !== undefined && { parallel_tool_calls: request.parallelToolCalls }),
    ...(request.maxTokens !== undefined && { max_completion_tokens: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...(request.stop && { stop: request.stop }),
    ...(responseFormat && {
      response_format:
        responseFormat.type === 'json'
          ? { type: 'json_object' }
          : {
              type: 'json_schema',
              json_schema: {
                name: responseFormat.name,
                schema: responseFormat.schema,
                ...(responseFormat.strict !== undefined && { strict: responseFormat.strict }),
              },
            },
    }),
    ...(effort && { reasoning_effort: effort }),
    ...(request.user !== undefined && { user: request.user }),
    ...(request.serviceTier !== undefined && { service_tier: request.serviceTier }),
    ...(request.verbosity !== undefined && { verbosity: request.verbosity }),
    ...request.openAI,
    ...(request.stream && { stream: true, stream_options: { include_usage: true } }),
  };
}
