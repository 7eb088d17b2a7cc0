import { isObject, type JsonObject } from '../../content.js';
import { invalid, untranslatable, type Message, type Part, type Tool, type ToolChoice } from '../neutral.js';
import { absent, any, dataUrl, defaultOnly, falsy, OPENAI_SHARED_KNOWN, optionalBoolean, optionalNumber, optionalString, parseDataUrl, readOpenAIShared, refuseUnknown, type ReadRequest } from '../wire-format.js';

const NAME = 'Chat Completions';

// What a Chat Completions body may hold to be carried over; anything else is refused by name.
const KNOWN = {
  model: any,
  messages: any,
  stream: any,
  stream_options: any,
  tools: any,
  tool_choice: any,
  parallel_tool_calls: any,
  max_tokens: any,
  max_completion_tokens: any,
  temperature: any,
  top_p: any,
  stop: any,
  response_format: any,
  user: any,
  n: defaultOnly(1),
  logprobs: falsy,
  store: falsy,
  frequency_penalty: defaultOnly(0),
  presence_penalty: defaultOnly(0),
  top_logprobs: absent,
  ...OPENAI_SHARED_KNOWN,
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
    const { id } = call;
    const { name, arguments: input } = call.function;
    if (typeof id !== 'string' || typeof name !== 'string' || typeof input !== 'string') {
      throw invalid(at, 'must have a string id, function.name and function.arguments');
    }
    return { type: 'tool-call', id, name, input };
  });
}

/** The messages: system and developer ones become the system prompt; tool results join the user turn that follows. */
function readMessages(messages: unknown, target: string): { system: string[]; messages: Message[] } {
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
    refuseUnknown(message, { role: any, content: any, name: absent, tool_calls: any, tool_call_id: any, refusal: any }, target, `${at}.`);
    switch (message.role) {
      case 'system':
      case 'developer':
        system.push(textParts(message.content, `${at}.content`, target).map((part) => (part.type === 'text' ? part.text : '')).join('\n'));
        return;
      case 'user':
        add('user', userParts(message.content, `${at}.content`, target));
        return;
      case 'assistant': {
        const parts = absent(message.content) ? [] : textParts(message.content, `${at}.content`, target);
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
    if (strict === true) throw untranslatable(`${at}.function.strict`, target);
    if (typeof name !== 'string') throw invalid(`${at}.function.name`, 'must be a string');
    return {
      name,
      ...(typeof description === 'string' && { description }),
      parameters: isObject(parameters) ? parameters : { type: 'object', properties: {} },
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
  refuseUnknown(body, KNOWN, target);
  const { system, messages } = readMessages(body.messages, target);
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
  const user = optionalString(body, 'user');
  const parallelToolCalls = optionalBoolean(body, 'parallel_tool_calls');
  const openAI = readOpenAIShared(body);
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
    ...(user !== undefined && { user }),
    ...(openAI && { openAI }),
    params: {
      maxTokens: maxTokensParam,
      temperature: 'temperature',
      topP: 'top_p',
      stop: 'stop',
      responseFormat: 'response_format',
      toolChoice: 'tool_choice',
      parallelToolCalls: 'parallel_tool_calls',
      user: 'user',
      messages: 'messages',
    },
  };
}

const EFFORTS = [
  [2048, 'low'],
  [8192, 'medium'],
] as const;

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
 * streamed call asking for usage, a thinking budget as a `reasoning_effort` (up to 2,048 tokens
 * low, up to 8,192 medium, more high).
 */
export function writeChatRequest(request: ReadRequest): JsonObject {
  const { reasoning, responseFormat } = request;
  const effort = reasoning?.effort ?? (reasoning?.budgetTokens === undefined ? undefined : (EFFORTS.find(([most]) => reasoning.budgetTokens! <= most)?.[1] ?? 'high'));
  return {
    model: request.model,
    messages: writeMessages(request),
    ...(request.tools.length > 0 && {
      tools: request.tools.map((tool) => ({
        type: 'function',
        function: { name: tool.name, ...(tool.description !== undefined && { description: tool.description }), parameters: tool.parameters },
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
          : { type: 'json_schema', json_schema: { name: responseFormat.name, schema: responseFormat.schema, ...(responseFormat.strict !== undefined && { strict: responseFormat.strict }) } },
    }),
    ...(effort && { reasoning_effort: effort }),
    ...(request.user !== undefined && { user: request.user }),
    ...request.openAI,
    ...(request.stream && { stream: true, stream_options: { include_usage: true } }),
  };
}
