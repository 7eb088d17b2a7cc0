import { isObject, type JsonObject } from '../../content.js';
import { invalid, untranslatable, type Message, type Part, type Request, type Tool, type ToolChoice } from '../neutral.js';
import {
  absent,
  any,
  defaultOnly,
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

const refused = (note: string, inert?: (value: unknown) => boolean): FieldRule => ({ class: 'refused', note, ...(inert && { inert }) });
/** OpenAI's hints Messages has no place for: carried to Chat Completions as they are, left out to Messages. */
const openAIHint = (note: string): FieldRule => ({ class: { 'Chat Completions': 'carried', Messages: 'omitted' }, note });

/** The fields of a Responses body and their classes (docs/TRANSLATION.md); any other is refused by name. */
export const RESPONSES_REQUEST_FIELDS: FieldRules = {
  model: { class: 'carried', note: "the upstream's name for the catalog model" },
  input: {
    class: { 'Chat Completions': 'carried', Messages: 'validated' },
    note: 'messages, function calls and their outputs, reasoning given back; to Messages, a conversation of only instructions sends them as its user turn',
  },
  instructions: { class: 'carried', note: 'the system prompt' },
  stream: { class: 'carried', note: "events in the client's format" },
  stream_options: { class: 'omitted', note: 'obfuscation of stream deltas, which a translated stream does not pad' },
  tools: { class: 'carried', note: 'function tools, `strict` included' },
  tool_choice: { class: 'carried', note: '' },
  parallel_tool_calls: { class: 'carried', note: '' },
  max_output_tokens: { class: 'carried', note: 'the output limit' },
  temperature: { class: { 'Chat Completions': 'carried', Messages: 'validated' }, note: "Messages' range is 0 to 1: above it refused" },
  top_p: { class: 'carried', note: '' },
  text: {
    class: 'carried',
    note: "`format` as `response_format` or Messages' `output_config.format`; `verbosity` as Chat Completions' `verbosity` (refused to Messages, which has none)",
  },
  reasoning: {
    class: 'carried',
    note: "`effort` as `reasoning_effort`, or to Messages a thinking budget (the efforts' table); `summary` is how thinking is shown",
  },
  include: {
    class: 'carried',
    inert: (value) => Array.isArray(value) && value.every((item) => item === 'reasoning.encrypted_content'),
    note: 'reasoning is always given back whole; anything else refused',
  },
  user: { class: 'carried', note: "Messages' `metadata.user_id` when `safety_identifier` is not set (then omitted)" },
  safety_identifier: { class: 'carried', note: "Messages' `metadata.user_id`" },
  service_tier: { class: 'carried', note: 'to Messages `auto` as `auto`, `default` as `standard_only`; another tier refused' },
  metadata: openAIHint("OpenAI's tags for stored responses"),
  prompt_cache_key: openAIHint('a caching hint'),
  prompt_cache_retention: openAIHint('a caching hint'),
  prompt_cache_options: openAIHint('a caching hint'),
  store: { class: 'omitted', inert: (value) => value === false, note: 'a translated response is never kept for a later `previous_response_id`' },
  truncation: { class: 'omitted', inert: (value) => value === 'disabled', note: '`auto` drops the oldest turns only when the context overflows' },
  background: refused('a response polled for later', (value) => value === false),
  previous_response_id: refused('a stored conversation'),
  conversation: refused('a stored conversation'),
  prompt: refused('a stored prompt'),
  context_management: refused("OpenAI's compaction"),
  top_logprobs: refused('no other format gives them'),
  moderation: refused("OpenAI's own moderation"),
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
    refuseUnknown(tool, { type: any, name: any, description: any, parameters: any, strict: any }, target, `${at}.`);
    if (typeof tool.name !== 'string') throw invalid(`${at}.name`, 'must be a string');
    return {
      name: tool.name,
      ...(typeof tool.description === 'string' && { description: tool.description }),
      parameters: isObject(tool.parameters) ? tool.parameters : { type: 'object', properties: {} },
      ...(tool.strict === true && { strict: true }),
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
  refuseUnknown(text, { format: any, verbosity: (value) => absent(value) || target !== 'Messages' }, target, 'text.');
  const { format } = text;
  if (absent(format) || (isObject(format) && format.type === 'text')) return undefined;
  if (isObject(format) && format.type === 'json_object') return { type: 'json' };
  if (isObject(format) && format.type === 'json_schema' && isObject(format.schema)) {
    return {
      type: 'json-schema',
      name: typeof format.name === 'string' ? format.name : 'response',
      schema: format.schema,
      ...(typeof format.strict === 'boolean' && { strict: format.strict }),
    };
  }
  throw untranslatable('text.format', target);
}

function readReasoning(reasoning: unknown, target: string): Request['reasoning'] {
  if (absent(reasoning)) return undefined;
  if (!isObject(reasoning)) throw invalid('reasoning', 'must be an object');
  refuseUnknown(reasoning, { effort: any, summary: any }, target, 'reasoning.');
  return readEffort(reasoning.effort, 'reasoning.effort');
}

/** A Responses body, read; `target` names the provider's format in refusals. */
export function readResponsesRequest(body: JsonObject, target: string): ReadRequest {
  const omitted: string[] = [];
  sortFields(body, RESPONSES_REQUEST_FIELDS, target, omitted);
  const { system, messages } = readInput(body.input, target);
  const instructions = optionalString(body, 'instructions');
  const maxTokens = optionalNumber(body, 'max_output_tokens');
  const temperature = optionalNumber(body, 'temperature');
  const topP = optionalNumber(body, 'top_p');
  const toolChoice = readToolChoice(body.tool_choice, target);
  const parallelToolCalls = optionalBoolean(body, 'parallel_tool_calls');
  const responseFormat = readText(body.text, target);
  const reasoning = readReasoning(body.reasoning, target);
  const serviceTier = optionalString(body, 'service_tier');
  const verbosity = isObject(body.text) ? optionalString(body.text, 'verbosity') : undefined;
  const { user, openAI } = readEndUser(body, target, omitted);
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
    ...(serviceTier !== undefined && { serviceTier }),
    ...(verbosity !== undefined && { verbosity }),
    ...(openAI && { openAI }),
    omitted,
    params: {
      maxTokens: 'max_output_tokens',
      temperature: 'temperature',
      topP: 'top_p',
      responseFormat: 'text.format',
      toolChoice: 'tool_choice',
      parallelToolCalls: 'parallel_tool_calls',
      reasoning: 'reasoning',
      user: 'user',
      serviceTier: 'service_tier',
      messages: 'input',
    },
  };
}
