import { isObject, type JsonObject } from '../../content.js';
import { invalid, untranslatable, type Message, type Part, type Request, type Tool, type ToolChoice } from '../neutral.js';
import { absent, any, defaultOnly, falsy, OPENAI_SHARED_KNOWN, optionalBoolean, optionalNumber, optionalString, parseDataUrl, readOpenAIShared, refuseUnknown, type ReadRequest } from '../wire-format.js';

const KNOWN = {
  model: any,
  input: any,
  instructions: any,
  stream: any,
  tools: any,
  tool_choice: any,
  parallel_tool_calls: any,
  max_output_tokens: any,
  temperature: any,
  top_p: any,
  text: any,
  reasoning: any,
  user: any,
  // Not stored either way: a translated response is never kept for a later `previous_response_id`.
  store: any,
  // Reasoning is always given back whole (its signature in `encrypted_content`).
  include: (value: unknown) => absent(value) || (Array.isArray(value) && value.every((item) => item === 'reasoning.encrypted_content')),
  truncation: defaultOnly('disabled'),
  background: falsy,
  previous_response_id: absent,
  ...OPENAI_SHARED_KNOWN,
};

function readPart(part: unknown, at: string, target: string): Part {
  if (!isObject(part)) throw invalid(at, 'must be an object');
  switch (part.type) {
    case 'input_text':
    case 'output_text':
    case 'text':
      if (typeof part.text !== 'string') throw invalid(`${at}.text`, 'must be a string');
      return { type: 'text', text: part.text };
    case 'refusal':
      return { type: 'text', text: String(part.refusal ?? '') };
    case 'input_image': {
      if (typeof part.image_url !== 'string') throw untranslatable(`${at}.file_id`, target);
      // Only OpenAI picks an image's resolution.
      refuseUnknown(part, { type: any, image_url: any, detail: defaultOnly('auto') }, target, `${at}.`);
      return { type: 'image', source: parseDataUrl(part.image_url) ?? { url: part.image_url } };
    }
    case 'input_file': {
      const filename = typeof part.filename === 'string' ? { filename: part.filename } : {};
      // A stored file not yet inlined (the handler's first look): its bytes arrive before the call.
      if (typeof part.file_id === 'string') return { type: 'file', mediaType: 'application/pdf', data: '', ...filename };
      const inline = typeof part.file_data === 'string' ? parseDataUrl(part.file_data) : undefined;
      if (inline === undefined) throw untranslatable(`${at}.file_url`, target);
      return { type: 'file', ...inline, ...filename };
    }
    default:
      throw untranslatable(`${at}.type`, target);
  }
}

function readContent(content: unknown, at: string, target: string): Part[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw invalid(at, 'must be a string or an array');
  return content.map((part, index) => readPart(part, `${at}[${index}]`, target));
}

function readInput(input: unknown, target: string): { system: string[]; messages: Message[] } {
  const system: string[] = [];
  const messages: Message[] = [];
  const add = (role: Message['role'], parts: Part[]) => {
    const last = messages.at(-1);
    if (last?.role === role) last.parts.push(...parts);
    else messages.push({ role, parts });
  };
  if (typeof input === 'string') return { system, messages: [{ role: 'user', parts: [{ type: 'text', text: input }] }] };
  if (!Array.isArray(input)) throw invalid('input', 'must be a string or an array');
  input.forEach((item, index) => {
    const at = `input[${index}]`;
    if (!isObject(item)) throw invalid(at, 'must be an object');
    const type = item.type ?? 'message';
    if (type === 'message') {
      const parts = readContent(item.content, `${at}.content`, target);
      if (item.role === 'system' || item.role === 'developer') {
        system.push(parts.map((part) => (part.type === 'text' ? part.text : '')).join('\n'));
      } else if (item.role === 'user' || item.role === 'assistant') {
        add(item.role, parts);
      } else {
        throw untranslatable(`${at}.role`, target);
      }
    } else if (type === 'function_call') {
      if (typeof item.call_id !== 'string' || typeof item.name !== 'string' || typeof item.arguments !== 'string') {
        throw invalid(at, 'must have a string call_id, name and arguments');
      }
      add('assistant', [{ type: 'tool-call', id: item.call_id, name: item.name, input: item.arguments }]);
    } else if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string') throw invalid(`${at}.call_id`, 'must be a string');
      add('user', [{ type: 'tool-result', callId: item.call_id, content: readContent(item.output, `${at}.output`, target) }]);
    } else if (type === 'reasoning') {
      // Thinking given back: its text in the summary, its signature (or, without a summary, its
      // redacted data) in encrypted_content, as the answers written by this gateway carry them.
      const summary = Array.isArray(item.summary) ? item.summary.map((entry) => (isObject(entry) ? String(entry.text ?? '') : '')).join('') : '';
      const encrypted = typeof item.encrypted_content === 'string' ? item.encrypted_content : undefined;
      if (encrypted === undefined) throw untranslatable(`${at}.encrypted_content`, target);
      add('assistant', [summary === '' ? { type: 'redacted-reasoning', data: encrypted } : { type: 'reasoning', text: summary, signature: encrypted }]);
    } else {
      throw untranslatable(`${at}.type`, target);
    }
  });
  return { system, messages };
}

function readTools(tools: unknown, target: string): Tool[] {
  if (absent(tools)) return [];
  if (!Array.isArray(tools)) throw invalid('tools', 'must be an array');
  return tools.map((tool, index): Tool => {
    const at = `tools[${index}]`;
    if (!isObject(tool) || tool.type !== 'function') throw untranslatable(`${at}.type`, target);
    refuseUnknown(tool, { type: any, name: any, description: any, parameters: any, strict: falsy }, target, `${at}.`);
    if (typeof tool.name !== 'string') throw invalid(`${at}.name`, 'must be a string');
    return {
      name: tool.name,
      ...(typeof tool.description === 'string' && { description: tool.description }),
      parameters: isObject(tool.parameters) ? tool.parameters : { type: 'object', properties: {} },
    };
  });
}

function readToolChoice(choice: unknown, target: string): ToolChoice | undefined {
  if (absent(choice)) return undefined;
  if (choice === 'auto' || choice === 'none' || choice === 'required') return { type: choice };
  if (isObject(choice) && choice.type === 'function' && typeof choice.name === 'string') return { type: 'tool', name: choice.name };
  throw untranslatable('tool_choice', target);
}

function readText(text: unknown, target: string): Request['responseFormat'] {
  if (absent(text)) return undefined;
  if (!isObject(text)) throw invalid('text', 'must be an object');
  refuseUnknown(text, { format: any }, target, 'text.');
  const { format } = text;
  if (absent(format) || (isObject(format) && format.type === 'text')) return undefined;
  if (isObject(format) && format.type === 'json_object') return { type: 'json' };
  if (isObject(format) && format.type === 'json_schema' && isObject(format.schema)) {
    return { type: 'json-schema', name: typeof format.name === 'string' ? format.name : 'response', schema: format.schema, ...(typeof format.strict === 'boolean' && { strict: format.strict }) };
  }
  throw untranslatable('text.format', target);
}

function readReasoning(reasoning: unknown, target: string): Request['reasoning'] {
  if (absent(reasoning)) return undefined;
  if (!isObject(reasoning)) throw invalid('reasoning', 'must be an object');
  refuseUnknown(reasoning, { effort: any, summary: any }, target, 'reasoning.');
  const { effort } = reasoning;
  if (absent(effort)) return undefined;
  if (effort === 'low' || effort === 'medium' || effort === 'high') return { effort };
  throw untranslatable('reasoning.effort', target);
}

/** A Responses body, read; `target` names the provider's format in refusals. */
export function readResponsesRequest(body: JsonObject, target: string): ReadRequest {
  refuseUnknown(body, KNOWN, target);
  const { system, messages } = readInput(body.input, target);
  const instructions = optionalString(body, 'instructions');
  const maxTokens = optionalNumber(body, 'max_output_tokens');
  const temperature = optionalNumber(body, 'temperature');
  const topP = optionalNumber(body, 'top_p');
  const toolChoice = readToolChoice(body.tool_choice, target);
  const parallelToolCalls = optionalBoolean(body, 'parallel_tool_calls');
  const responseFormat = readText(body.text, target);
  const reasoning = readReasoning(body.reasoning, target);
  const user = optionalString(body, 'user');
  const openAI = readOpenAIShared(body);
  return {
    model: String(body.model),
    stream: body.stream === true,
    system: instructions === undefined ? system : [instructions, ...system],
    messages,
    tools: readTools(body.tools, target),
    ...(toolChoice && { toolChoice }),
    ...(parallelToolCalls !== undefined && { parallelToolCalls }),
    ...(maxTokens !== undefined && { maxTokens }),
    ...(temperature !== undefined && { temperature }),
    ...(topP !== undefined && { topP }),
    ...(responseFormat && { responseFormat }),
    ...(reasoning && { reasoning }),
    ...(user !== undefined && { user }),
    ...(openAI && { openAI }),
    params: {
      maxTokens: 'max_output_tokens',
      temperature: 'temperature',
      topP: 'top_p',
      responseFormat: 'text.format',
      toolChoice: 'tool_choice',
      parallelToolCalls: 'parallel_tool_calls',
      reasoning: 'reasoning',
      user: 'user',
      messages: 'input',
    },
  };
}
