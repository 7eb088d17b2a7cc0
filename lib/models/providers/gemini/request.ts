import type { JsonObject } from '../../content.js';
import { EFFORT_BUDGETS, textOf, untranslatable, type Message, type Part, type Tool } from '../../formats/neutral.js';
import { argumentsObject, parseDataUrl, type ReadRequest } from '../../formats/wire-format.js';
import { splitCallId } from './call-id.js';
import { geminiSchema } from './schema.js';

// The neutral request as a Gemini `generateContent` body (ai.google.dev/api/generate-content).

/** Gemini's most stop sequences, and its temperature's top. */
const MAX_STOP_SEQUENCES = 5;
const MAX_TEMPERATURE = 2;
/** `thinkingBudget` for "as much as the model decides". */
const DYNAMIC_THINKING = -1;

const SERVICE_TIERS_WITHOUT_EFFECT = new Set(['auto', 'default']);

/**
 * What Gemini cannot carry of `request`, refused (400, naming the client's field), and what it
 * leaves out (hints), named: the end user's id, OpenAI's caching and metadata hints, a service tier
 * that changes nothing. `name` is the API's, as refusals say it.
 */
export function checkGeminiRequest(request: ReadRequest, name: string): string[] {
  const { params } = request;
  const omitted: string[] = [];
  if (request.parallelToolCalls === false) throw untranslatable(params.parallelToolCalls ?? 'parallel_tool_calls', name);
  if (request.verbosity !== undefined) throw untranslatable(params.verbosity ?? 'verbosity', name);
  if (request.serviceTier !== undefined) {
    if (!SERVICE_TIERS_WITHOUT_EFFECT.has(request.serviceTier)) throw untranslatable(`${params.serviceTier ?? 'service_tier'}: ${request.serviceTier}`, name);
    omitted.push(params.serviceTier ?? 'service_tier');
  }
  if (request.user !== undefined) omitted.push(params.user ?? 'user');
  omitted.push(...Object.keys(request.openAI ?? {}));
  geminiRequest(request, name);
  return omitted;
}

/** `request` as a `generateContent` body; refuses (400, by name) what Gemini cannot carry. */
export function geminiRequest(request: ReadRequest, name: string): JsonObject {
  const { params } = request;
  const messagesParam = params.messages ?? 'messages';
  const callNames = new Map<string, string>();
  for (const message of request.messages) for (const part of message.parts) if (part.type === 'tool-call') callNames.set(part.id, part.name);

  const contents: Array<{ role: string; parts: JsonObject[] }> = [];
  for (const message of request.messages) {
    const parts = geminiParts(message, callNames, messagesParam, name);
    if (parts.length === 0) continue;
    const role = message.role === 'user' ? 'user' : 'model';
    const last = contents.at(-1);
    // One turn per role: the results of parallel calls answer them together, in one turn.
    if (last?.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  }
  const body: JsonObject = { contents };
  if (request.system.length > 0) body.systemInstruction = { parts: request.system.map((text) => ({ text })) };
  const toolsParam = params.tools ?? 'tools';
  if (request.tools.length > 0)
    body.tools = [{ functionDeclarations: request.tools.map((tool, index) => declaration(tool, `${toolsParam}[${index}] (${tool.name}) schema`, name)) }];
  const mode = toolMode(request);
  if (mode !== undefined && request.tools.length > 0) body.toolConfig = { functionCallingConfig: mode };
  const config = generationConfig(request, name);
  if (Object.keys(config).length > 0) body.generationConfig = config;
  return body;
}

function declaration(tool: Tool, where: string, name: string): JsonObject {
  const parameters = geminiSchema(tool.parameters, where, name);
  // A function without parameters declares none: Gemini refuses an object schema without properties.
  const empty = parameters.type === 'object' && Object.keys((parameters.properties as JsonObject | undefined) ?? {}).length === 0;
  return { name: tool.name, ...(tool.description !== undefined && { description: tool.description }), ...(!empty && { parameters }) };
}

function toolMode({ toolChoice }: ReadRequest): JsonObject | undefined {
  switch (toolChoice?.type) {
    case undefined:
      return undefined;
    case 'auto':
      return { mode: 'AUTO' };
    case 'none':
      return { mode: 'NONE' };
    case 'required':
      return { mode: 'ANY' };
    case 'tool':
      return { mode: 'ANY', allowedFunctionNames: [toolChoice.name] };
  }
}

/**
 * One neutral message's parts as Gemini's. Thinking goes back by its signature only (Gemini takes
 * no thought text back), on the part that follows it, as Gemini gave it; a tool call's own
 * signature travels in its id (docs/DECISIONS.md). A signature with no part after it goes on an
 * empty text part, as Gemini's streams end with one.
 */
function geminiParts(message: Message, callNames: ReadonlyMap<string, string>, at: string, name: string): JsonObject[] {
  const out: JsonObject[] = [];
  let signature: string | undefined;
  const add = (part: JsonObject) => {
    if (signature !== undefined && part.thoughtSignature === undefined) part.thoughtSignature = signature;
    signature = undefined;
    out.push(part);
  };
  for (const part of message.parts) {
    switch (part.type) {
      case 'text':
        add({ text: part.text });
        break;
      case 'image': {
        const inline = 'url' in part.source ? parseDataUrl(part.source.url) : part.source;
        // Gemini fetches no URL it is given (only its own files'): the client inlines the image.
        if (inline === undefined) throw untranslatable(`${at}: an image by URL`, name);
        add({ inlineData: { mimeType: inline.mediaType, data: inline.data } });
        break;
      }
      case 'file':
        add({ inlineData: { mimeType: part.mediaType, data: part.data } });
        break;
      case 'tool-call': {
        const own = splitCallId(part.id).signature;
        add({ functionCall: { name: part.name, args: argumentsObject(part.input) }, ...(own !== undefined && { thoughtSignature: own }) });
        break;
      }
      case 'tool-result':
        add(functionResponse(part, callNames, at, name));
        break;
      case 'reasoning':
        if (part.signature !== undefined && part.signature !== '') signature = part.signature;
        break;
      case 'redacted-reasoning':
        signature = part.data;
        break;
    }
  }
  if (signature !== undefined) out.push({ text: '', thoughtSignature: signature });
  return out;
}

/** A tool's result as Gemini's `functionResponse`: named as its call was, its text as `output` (or `error`), as Gemini's reference asks. */
function functionResponse(part: Extract<Part, { type: 'tool-result' }>, callNames: ReadonlyMap<string, string>, at: string, name: string): JsonObject {
  const callName = callNames.get(part.callId);
  // Gemini matches a result to its call by the function's name, which only the call says.
  if (callName === undefined) throw untranslatable(`${at}: the result of tool call '${part.callId}', which is not in the conversation`, name);
  if (part.content.some((inner) => inner.type !== 'text')) throw untranslatable(`${at}: a tool result that is not text`, name);
  const text = textOf(part.content);
  return { functionResponse: { name: callName, response: part.isError === true ? { error: text } : { output: text } } };
}

function generationConfig(request: ReadRequest, name: string): JsonObject {
  const { params } = request;
  const config: JsonObject = {};
  if (request.maxTokens !== undefined) config.maxOutputTokens = request.maxTokens;
  if (request.temperature !== undefined) {
    if (request.temperature > MAX_TEMPERATURE) throw untranslatable(`${params.temperature ?? 'temperature'} above ${MAX_TEMPERATURE}`, name);
    config.temperature = request.temperature;
  }
  if (request.topP !== undefined) config.topP = request.topP;
  if (request.stop !== undefined && request.stop.length > 0) {
    if (request.stop.length > MAX_STOP_SEQUENCES) throw untranslatable(`${params.stop ?? 'stop'}: more than ${MAX_STOP_SEQUENCES}`, name);
    config.stopSequences = request.stop;
  }
  const format = request.responseFormat;
  if (format !== undefined) {
    config.responseMimeType = 'application/json';
    if (format.type === 'json-schema') config.responseSchema = geminiSchema(format.schema, `${params.responseFormat ?? 'response_format'} schema`, name);
  }
  const thinking = thinkingConfig(request);
  if (thinking !== undefined) config.thinkingConfig = thinking;
  return config;
}

/** The thinking asked for: a budget, an effort's budget (`none`: no thinking), or the model's own (`adaptive`); thoughts' summaries with it. */
function thinkingConfig({ reasoning }: ReadRequest): JsonObject | undefined {
  if (reasoning === undefined) return undefined;
  if (reasoning.effort === 'none') return { thinkingBudget: 0 };
  const budget = reasoning.budgetTokens ?? (reasoning.effort === undefined ? DYNAMIC_THINKING : EFFORT_BUDGETS[reasoning.effort]);
  return { thinkingBudget: budget, includeThoughts: true };
}
