import { isObject, type JsonObject } from '../../content.js';

// How the echo provider takes part in a tool loop: offered tools, it calls the first (or the one
// `tool_choice` names) with arguments made from the tool's schema; given a tool's result, it
// answers with text, so that the loop ends.

/** The call echo makes: the tool's name and its arguments as the JSON text the APIs carry. */
export interface EchoToolCall {
  name: string;
  arguments: string;
}

interface OfferedTool {
  name: string;
  schema: unknown;
}

/** Deeper than any schema a tool sensibly has: it stops a recursive `$ref` from looping. */
const MAX_SCHEMA_DEPTH = 16;

function resolveReference(root: unknown, reference: string): unknown {
  if (!reference.startsWith('#')) return undefined;
  return reference
    .slice(1)
    .split('/')
    .filter(Boolean)
    .reduce<unknown>((node, part) => (isObject(node) ? node[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined), root);
}

/** 0, or the bound nearest to it: a schema's `minimum` (`exclusiveMinimum` plus one) or `maximum`. */
function numberIn(schema: JsonObject): number {
  const bound = (inclusive: unknown, exclusive: unknown, step: number) =>
    typeof inclusive === 'number' ? inclusive : typeof exclusive === 'number' ? exclusive + step : undefined;
  const low = bound(schema.minimum, schema.exclusiveMinimum, 1) ?? -Infinity;
  const high = bound(schema.maximum, schema.exclusiveMaximum, -1) ?? Infinity;
  return Math.min(Math.max(0, low), high);
}

/**
 * A value that a JSON schema accepts, kept minimal: an object's required properties only, an array
 * of its `minItems`, a string "echo", a number 0 or the bound nearest to it, a boolean true, an enum's first value.
 * @example exampleOf({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }) // { city: 'echo' }
 */
export function exampleOf(schema: unknown, root: unknown = schema, depth = 0): unknown {
  if (!isObject(schema) || depth > MAX_SCHEMA_DEPTH) return null;
  if (typeof schema.$ref === 'string') return exampleOf(resolveReference(root, schema.$ref), root, depth + 1);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const choices of [schema.anyOf, schema.oneOf, schema.allOf]) {
    if (Array.isArray(choices) && choices.length > 0) return exampleOf(choices[0], root, depth + 1);
  }
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  const type = types.find((candidate) => candidate !== 'null') ?? types[0];
  switch (type) {
    case 'string':
      return 'echo';
    case 'number':
    case 'integer':
      return numberIn(schema);
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array': {
      const count = typeof schema.minItems === 'number' ? schema.minItems : 0;
      return Array.from({ length: count }, () => exampleOf(schema.items, root, depth + 1));
    }
    default: {
      if (type !== 'object' && !isObject(schema.properties)) return null;
      const properties = isObject(schema.properties) ? schema.properties : {};
      const required = Array.isArray(schema.required) ? schema.required.filter((name): name is string => typeof name === 'string') : [];
      return Object.fromEntries(required.map((name) => [name, exampleOf(properties[name], root, depth + 1)]));
    }
  }
}

/** The tool to call: the one `tool_choice` names, else the first offered; none when `tool_choice` says none. */
function chosenTool(tools: OfferedTool[], choice: unknown, namedChoice: string | undefined): EchoToolCall | undefined {
  if (choice === 'none' || (isObject(choice) && choice.type === 'none')) return undefined;
  const tool = tools.find((candidate) => candidate.name === namedChoice) ?? tools[0];
  if (tool === undefined) return undefined;
  const argumentsObject = exampleOf(tool.schema);
  return { name: tool.name, arguments: JSON.stringify(isObject(argumentsObject) ? argumentsObject : {}) };
}

const lastOf = (list: unknown): unknown => (Array.isArray(list) ? list.at(-1) : undefined);

/** The call for a Chat Completions body: its `function` tools; none after a `tool` message. */
export function chatToolCall(body: JsonObject): EchoToolCall | undefined {
  const last = lastOf(body.messages);
  if (!Array.isArray(body.tools) || (isObject(last) && last.role === 'tool')) return undefined;
  const tools = body.tools
    .filter((tool): tool is JsonObject => isObject(tool) && tool.type === 'function' && isObject(tool.function) && typeof tool.function.name === 'string')
    .map((tool) => ({ name: String((tool.function as JsonObject).name), schema: (tool.function as JsonObject).parameters }));
  const choice = body.tool_choice;
  const named = isObject(choice) && isObject(choice.function) && typeof choice.function.name === 'string' ? choice.function.name : undefined;
  return chosenTool(tools, choice, named);
}

/** The call for a Responses body: its `function` tools; none after a `function_call_output` item. */
export function responsesToolCall(body: JsonObject): EchoToolCall | undefined {
  const last = lastOf(body.input);
  if (!Array.isArray(body.tools) || (isObject(last) && last.type === 'function_call_output')) return undefined;
  const tools = body.tools
    .filter((tool): tool is JsonObject => isObject(tool) && tool.type === 'function' && typeof tool.name === 'string')
    .map((tool) => ({ name: String(tool.name), schema: tool.parameters }));
  const choice = body.tool_choice;
  const named = isObject(choice) && choice.type === 'function' && typeof choice.name === 'string' ? choice.name : undefined;
  return chosenTool(tools, choice, named);
}

/** The tool results of a Messages message: its `tool_result` blocks. */
const toolResultBlocks = (message: unknown): JsonObject[] =>
  isObject(message) && Array.isArray(message.content)
    ? message.content.filter((block): block is JsonObject => isObject(block) && block.type === 'tool_result')
    : [];

/** The call for a Messages body: its client tools (server tools have a versioned `type`); none after a `tool_result`. */
export function messagesToolCall(body: JsonObject): EchoToolCall | undefined {
  if (!Array.isArray(body.tools) || toolResultBlocks(lastOf(body.messages)).length > 0) return undefined;
  const tools = body.tools
    .filter((tool): tool is JsonObject => isObject(tool) && (tool.type === undefined || tool.type === 'custom') && typeof tool.name === 'string')
    .map((tool) => ({ name: String(tool.name), schema: tool.input_schema }));
  const choice = body.tool_choice;
  const named = isObject(choice) && choice.type === 'tool' && typeof choice.name === 'string' ? choice.name : undefined;
  return chosenTool(tools, choice, named);
}

// A body that ends with a tool's result gets text about it; `undefined` when it ends otherwise.

/** The result a Chat Completions body ends with: the last message's content, when it is a `tool` message. */
export function chatToolResult(messages: unknown[]): unknown {
  const last = messages.at(-1);
  return isObject(last) && last.role === 'tool' ? (last.content ?? '') : undefined;
}

/** The result a Responses body ends with: the `output` of a final `function_call_output` item. */
export function responsesToolResult(input: unknown): unknown {
  const last = lastOf(input);
  return isObject(last) && last.type === 'function_call_output' ? (last.output ?? '') : undefined;
}

/** The result a Messages body ends with: the content of the last message's last `tool_result` block. */
export function messagesToolResult(messages: unknown[]): unknown {
  const block = toolResultBlocks(messages.at(-1)).at(-1);
  return block === undefined ? undefined : (block.content ?? '');
}

/** The arguments in the pieces a streamed call carries them in, as the real APIs stream them. */
export function argumentPieces(text: string, size = 8): string[] {
  const pieces: string[] = [];
  for (let start = 0; start < text.length; start += size) pieces.push(text.slice(start, start + size));
  return pieces;
}
