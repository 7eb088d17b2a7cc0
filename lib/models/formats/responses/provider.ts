import { unreadableStreamEvent, upstreamStreamFailure } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import {
  effortOf,
  invalid,
  untranslatable,
  type Answer,
  type FinishReason,
  type Part,
  type StreamPart,
  type StreamReader,
  type ToolChoice,
} from '../neutral.js';
import { readResponsesUsage } from './answer.js';
import { dataUrl, omit, type ReadRequest } from '../wire-format.js';

// Responses as the provider's format: requests written, answers and streams read, for the
// clients of the other formats calling a provider that speaks nothing else.

const NAME = 'Responses';

function inputParts(parts: Part[], request: ReadRequest): JsonObject[] {
  return parts.map((part): JsonObject => {
    switch (part.type) {
      case 'text':
        return { type: 'input_text', text: part.text };
      case 'image':
        return { type: 'input_image', image_url: 'url' in part.source ? part.source.url : dataUrl(part.source.mediaType, part.source.data), detail: 'auto' };
      case 'file':
        return { type: 'input_file', filename: part.filename ?? 'document.pdf', file_data: dataUrl(part.mediaType, part.data) };
      default:
        throw untranslatable(`${request.params.messages ?? 'messages'} (${part.type} content)`, NAME);
    }
  });
}

function writeInput(request: ReadRequest): JsonObject[] {
  const items: JsonObject[] = [];
  for (const message of request.messages) {
    let pending: Part[] = [];
    const flush = () => {
      if (pending.length === 0) return;
      if (message.role === 'user') items.push({ role: 'user', content: inputParts(pending, request) });
      else items.push({ role: 'assistant', content: pending.map((part) => (part.type === 'text' ? part.text : '')).join('') });
      pending = [];
    };
    for (const part of message.parts) {
      if (part.type === 'tool-result') {
        flush();
        const output = part.content.map((inner) => {
          if (inner.type !== 'text') throw untranslatable(`${request.params.messages ?? 'messages'} (a tool result's ${inner.type} content)`, NAME);
          return inner.text;
        });
        items.push({ type: 'function_call_output', call_id: part.callId, output: `${part.isError ? 'Error: ' : ''}${output.join('\n')}` });
      } else if (part.type === 'tool-call') {
        flush();
        items.push({ type: 'function_call', call_id: part.id, name: part.name, arguments: part.input });
      } else if (part.type === 'reasoning' || part.type === 'redacted-reasoning') {
        // Another model's thinking, signed for it alone: the client keeps it for when the conversation goes back there.
        omit(request.omitted, 'thinking');
      } else {
        pending.push(part);
      }
    }
    flush();
  }
  return items;
}

const writeToolChoice = (choice: ToolChoice) => (choice.type === 'tool' ? { type: 'function', name: choice.name } : choice.type);

/** The least `max_output_tokens` Responses takes. */
const MIN_OUTPUT_TOKENS = 16;

/**
 * A neutral request as a Responses body: never stored upstream (`store: false`), tools strict only
 * when the client asked (Responses makes them strict by default, which most schemas are not written
 * for), a thinking budget as an effort (`effortOf()`). Responses has no stop sequences: those are refused,
 * as an output limit below the 16 tokens it takes is.
 */
export function writeResponsesRequest(request: ReadRequest): JsonObject {
  const { responseFormat } = request;
  if (request.stop) throw untranslatable(request.params.stop ?? 'stop', NAME);
  if (request.maxTokens !== undefined && request.maxTokens < MIN_OUTPUT_TOKENS) {
    throw invalid(
      request.params.maxTokens ?? 'max_tokens',
      `must be at least ${MIN_OUTPUT_TOKENS} for this model: its provider speaks ${NAME}, which refuses fewer`,
    );
  }
  const effort = effortOf(request.reasoning);
  return {
    model: request.model,
    ...(request.system.length > 0 && { instructions: request.system.join('\n\n') }),
    input: writeInput(request),
    ...(request.tools.length > 0 && {
      tools: request.tools.map((tool) => ({
        type: 'function',
        name: tool.name,
        ...(tool.description !== undefined && { description: tool.description }),
        parameters: tool.parameters,
        strict: tool.strict === true,
      })),
    }),
    ...(request.tools.length > 0 && request.toolChoice && { tool_choice: writeToolChoice(request.toolChoice) }),
    ...(request.parallelToolCalls !== undefined && { parallel_tool_calls: request.parallelToolCalls }),
    ...(request.maxTokens !== undefined && { max_output_tokens: request.maxTokens }),
    ...(request.temperature !== undefined && { temperature: request.temperature }),
    ...(request.topP !== undefined && { top_p: request.topP }),
    ...((responseFormat || request.verbosity !== undefined) && {
      text: {
        ...(responseFormat && {
          format:
            responseFormat.type === 'json'
              ? { type: 'json_object' }
              : {
                  type: 'json_schema',
                  name: responseFormat.name,
                  schema: responseFormat.schema,
                  ...(responseFormat.strict !== undefined && { strict: responseFormat.strict }),
                },
        }),
        ...(request.verbosity !== undefined && { verbosity: request.verbosity }),
      },
    }),
    ...(effort && { reasoning: { effort } }),
    ...(request.user !== undefined && { user: request.user }),
    ...(request.serviceTier !== undefined && { service_tier: request.serviceTier }),
    ...request.openAI,
    store: false,
    ...(request.stream && { stream: true }),
  };
}

/** How a response ended: its incomplete reason, else tool calls if it made any. */
function finishOf(response: JsonObject, calledTools: boolean, refused: boolean): FinishReason {
  const reason = isObject(response.incomplete_details) ? response.incomplete_details.reason : undefined;
  if (reason === 'max_output_tokens') return 'length';
  if (reason === 'content_filter') return 'content-filter';
  if (refused) return 'refusal';
  return calledTools ? 'tool-calls' : 'stop';
}

const summaryText = (item: JsonObject) =>
  Array.isArray(item.summary) ? item.summary.map((entry) => (isObject(entry) && typeof entry.text === 'string' ? entry.text : '')).join('') : '';

/** A response object, read: its messages' text (refusals too), function calls, and reasoning that has a summary. */
export function readResponsesAnswer(body: JsonObject): Answer {
  const content: Part[] = [];
  let refused = false;
  for (const item of Array.isArray(body.output) ? body.output : []) {
    if (!isObject(item)) continue;
    if (item.type === 'message' && Array.isArray(item.content)) {
      for (const part of item.content) {
        if (isObject(part) && part.type === 'output_text' && typeof part.text === 'string') content.push({ type: 'text', text: part.text });
        if (isObject(part) && part.type === 'refusal' && typeof part.refusal === 'string') {
          refused = true;
          content.push({ type: 'text', text: part.refusal });
        }
      }
    } else if (item.type === 'function_call') {
      content.push({ type: 'tool-call', id: String(item.call_id), name: String(item.name), input: String(item.arguments ?? '') });
    } else if (item.type === 'reasoning' && summaryText(item) !== '') {
      content.push({ type: 'reasoning', text: summaryText(item) });
    }
  }
  return {
    id: typeof body.id === 'string' ? body.id : '',
    model: typeof body.model === 'string' ? body.model : '',
    created: typeof body.created_at === 'number' ? body.created_at : Math.floor(Date.now() / 1000),
    content,
    finishReason: finishOf(
      body,
      content.some((part) => part.type === 'tool-call'),
      refused,
    ),
    usage: readResponsesUsage(body.usage),
  };
}

/**
 * Reads a Responses stream: `response.created` starts; each output item opens with
 * `response.output_item.added` and closes with `response.output_item.done` (a message's text
 * block opens with its first text delta; a function call's deltas name its item); the response's
 * last event (`response.completed` or `response.incomplete`) finishes with its usage.
 */
export class ResponsesStreamReader implements StreamReader {
  /** What each open item is, by item id: a message (and whether its text opened), a call (its call id), reasoning. */
  readonly #items = new Map<string, { kind: 'message' | 'reasoning'; open: boolean } | { kind: 'call'; callId: string }>();
  #calledTools = false;
  #refused = false;

  read(name: string | undefined, data: unknown): StreamPart[] {
    if (!isObject(data)) return [];
    const type = data.type ?? name;
    if (typeof type !== 'string') throw unreadableStreamEvent('an event without a type');
    const item = isObject(data.item) ? data.item : {};
    const itemId = typeof data.item_id === 'string' ? data.item_id : String(item.id ?? '');
    const entry = this.#items.get(itemId);
    switch (type) {
      case 'response.created': {
        if (!isObject(data.response)) throw unreadableStreamEvent('a response.created without its response');
        const { response } = data;
        return [
          {
            type: 'start',
            id: String(response.id ?? ''),
            model: String(response.model ?? ''),
            created: typeof response.created_at === 'number' ? response.created_at : Math.floor(Date.now() / 1000),
          },
        ];
      }
      case 'response.output_item.added':
        if (item.type === 'message') this.#items.set(itemId, { kind: 'message', open: false });
        // Reasoning opens with its first summary delta: an item without a summary (the usual) is none.
        if (item.type === 'reasoning') this.#items.set(itemId, { kind: 'reasoning', open: false });
        if (item.type === 'function_call') {
          this.#calledTools = true;
          const callId = String(item.call_id);
          this.#items.set(itemId, { kind: 'call', callId });
          const first =
            typeof item.arguments === 'string' && item.arguments !== '' ? [{ type: 'tool-call-delta' as const, id: callId, delta: item.arguments }] : [];
          return [{ type: 'tool-call-start', id: callId, name: String(item.name) }, ...first];
        }
        return [];
      case 'response.output_text.delta':
      case 'response.refusal.delta': {
        if (entry?.kind !== 'message' || typeof data.delta !== 'string' || data.delta === '') return [];
        const refusal = type === 'response.refusal.delta';
        if (refusal) this.#refused = true;
        const parts: StreamPart[] = entry.open ? [] : [refusal ? { type: 'text-start', refusal } : { type: 'text-start' }];
        entry.open = true;
        parts.push({ type: 'text-delta', delta: data.delta });
        return parts;
      }
      case 'response.function_call_arguments.delta':
        return entry?.kind === 'call' && typeof data.delta === 'string' && data.delta !== ''
          ? [{ type: 'tool-call-delta', id: entry.callId, delta: data.delta }]
          : [];
      case 'response.reasoning_summary_text.delta': {
        if (entry?.kind !== 'reasoning' || typeof data.delta !== 'string' || data.delta === '') return [];
        const parts: StreamPart[] = entry.open ? [] : [{ type: 'reasoning-start' }];
        entry.open = true;
        parts.push({ type: 'reasoning-delta', delta: data.delta });
        return parts;
      }
      case 'response.output_item.done':
        this.#items.delete(itemId);
        if (entry?.kind === 'message') return entry.open ? [{ type: 'text-end' }] : [];
        if (entry?.kind === 'call') return [{ type: 'tool-call-end', id: entry.callId }];
        if (entry?.kind === 'reasoning') return entry.open ? [{ type: 'reasoning-end' }] : [];
        return [];
      case 'response.completed':
      case 'response.incomplete': {
        const response = isObject(data.response) ? data.response : {};
        return [{ type: 'finish', finishReason: finishOf(response, this.#calledTools, this.#refused), usage: readResponsesUsage(response.usage) }];
      }
      case 'response.failed':
        throw upstreamStreamFailure(isObject(data.response) ? data.response.error : undefined);
      case 'error':
        throw upstreamStreamFailure(data);
      default:
        return [];
    }
  }

  end(): StreamPart[] {
    return [];
  }
}
