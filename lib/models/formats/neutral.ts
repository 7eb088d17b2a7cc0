import type { TokenUsage } from '../../usage/token-usage.js';
import { errors, type GatewayError } from '../../errors/gateway-error.js';

// The neutral representation every wire format reads and writes (docs/ARCHITECTURE.md,
// "Translation between formats"), after the AI SDK's provider specification: a prompt of parts,
// an answer of parts, and a stream of parts. A format knows only its own wire shape and these
// types; there is no converter between two formats.

/** An image, by URL or inline (base64). */
export type ImageSource = { url: string } | { mediaType: string; data: string };

/** One piece of a message. */
export type Part =
  | { type: 'text'; text: string }
  | { type: 'image'; source: ImageSource }
  /** A PDF, inline (base64), with its name when known. */
  | { type: 'file'; mediaType: string; data: string; filename?: string }
  /** `input` is the arguments' JSON text, as the model wrote it. */
  | { type: 'tool-call'; id: string; name: string; input: string }
  | { type: 'tool-result'; callId: string; content: Part[]; isError?: boolean }
  /** The model's thinking, with the signature that lets a later turn send it back. */
  | { type: 'reasoning'; text: string; signature?: string }
  /** Thinking the provider keeps encrypted: sent back as it came. */
  | { type: 'redacted-reasoning'; data: string };

export interface Message {
  role: 'user' | 'assistant';
  parts: Part[];
}

export interface Tool {
  name: string;
  description?: string;
  /** The JSON schema of its arguments. */
  parameters: Record<string, unknown>;
  /** True: the arguments follow the schema exactly (OpenAI's `strict`, Anthropic's `strict`). */
  strict?: boolean;
}

export type ToolChoice = { type: 'auto' | 'none' | 'required' } | { type: 'tool'; name: string };

/**
 * The fields OpenAI's Chat Completions and Responses share, by name and meaning: carried between
 * the two as the client sent them; hints Messages has no place for (`safety_identifier` is carried
 * there as the end user's id).
 */
export const OPENAI_SHARED_FIELDS = ['metadata', 'prompt_cache_key', 'prompt_cache_retention', 'prompt_cache_options', 'safety_identifier'] as const;

/** How hard a model thinks, by OpenAI's names (`reasoning_effort`, `output_config.effort` of Messages). */
export type Effort = 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh' | 'max';
export const EFFORTS: readonly Effort[] = ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'];

/**
 * The thinking budget of each effort, in tokens, as a Messages provider is sent it; back, a budget
 * is the least effort whose budget holds it, `high` above (docs/TRANSLATION.md, "Reasoning").
 */
export const EFFORT_BUDGETS: Readonly<Record<Exclude<Effort, 'none'>, number>> = {
  minimal: 1024,
  low: 2048,
  medium: 8192,
  high: 24_576,
  xhigh: 32_768,
  max: 65_536,
};
const BUDGET_EFFORTS = ['minimal', 'low', 'medium'] as const;

/** The OpenAI effort of `reasoning`: its own, or its budget's; none when adaptive (the model's default) or unset. */
export function effortOf(reasoning: Request['reasoning']): Effort | undefined {
  if (reasoning?.effort !== undefined) return reasoning.effort;
  const budget = reasoning?.budgetTokens;
  if (budget === undefined) return undefined;
  return BUDGET_EFFORTS.find((effort) => budget <= EFFORT_BUDGETS[effort]) ?? 'high';
}

/** A request, whatever format it came in. */
export interface Request {
  model: string;
  stream: boolean;
  /** System and developer instructions, in order. */
  system: string[];
  messages: Message[];
  tools: Tool[];
  toolChoice?: ToolChoice;
  /** False: at most one tool call per turn. */
  parallelToolCalls?: boolean;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  stop?: string[];
  /** JSON mode (`json`) or a JSON schema the answer follows. */
  responseFormat?: { type: 'json' } | { type: 'json-schema'; name: string; schema: Record<string, unknown>; strict?: boolean };
  /** How much the model may think: a token budget, an effort, or as much as the model decides (`adaptive`). */
  reasoning?: { budgetTokens?: number; effort?: Effort; adaptive?: true };
  /** An end user's id, for the provider's abuse checks. */
  user?: string;
  /** The capacity the call is served from, by OpenAI's names: `auto`, `default`, `flex`, `priority`... */
  serviceTier?: string;
  /** How long an answer OpenAI's models give: `low`, `medium`, `high`. */
  verbosity?: string;
  /** `OPENAI_SHARED_FIELDS` the client set, as it set them: Messages has no place for them. */
  openAI?: Partial<Record<(typeof OPENAI_SHARED_FIELDS)[number], unknown>>;
}

/** Why the model stopped. */
export type FinishReason = 'stop' | 'length' | 'tool-calls' | 'stop-sequence' | 'content-filter' | 'refusal' | 'pause' | 'other';

/** Tokens as the upstream counted them: the one usage type. `inputTokens` includes cache reads and writes. */
export type Usage = TokenUsage;

/** A whole answer. */
export interface Answer {
  id: string;
  model: string;
  /** Text, tool-call and reasoning parts, in order. */
  content: Part[];
  finishReason: FinishReason;
  /** The stop sequence met, when `finishReason` is `stop-sequence`. */
  stopSequence?: string;
  usage: Usage;
  /** Unix seconds. */
  created: number;
}

/**
 * One event of a streamed answer. A content block (text, reasoning, tool call) opens with its
 * `-start`, grows by `-delta`s and closes with its `-end`; tool calls are told apart by `id`,
 * and several may be open at once (parallel calls whose arguments interleave).
 */
export type StreamPart =
  | { type: 'start'; id: string; model: string; created: number; usage?: Usage }
  /** `refusal`: the model declines, in words a format with a place for them shows apart. */
  | { type: 'text-start'; refusal?: true }
  | { type: 'text-delta'; delta: string }
  | { type: 'text-end' }
  | { type: 'reasoning-start'; redacted?: string }
  | { type: 'reasoning-delta'; delta: string }
  | { type: 'reasoning-signature'; signature: string }
  | { type: 'reasoning-end' }
  | { type: 'tool-call-start'; id: string; name: string }
  | { type: 'tool-call-delta'; id: string; delta: string }
  | { type: 'tool-call-end'; id: string }
  | { type: 'finish'; finishReason: FinishReason; stopSequence?: string; usage: Usage };

/** Reads one format's stream: each upstream event (its name and parsed data) into neutral parts. */
export interface StreamReader {
  read(name: string | undefined, data: unknown): StreamPart[];
  /** What the upstream's stream ending completes (a finish held back for the usage that follows it). */
  end(): StreamPart[];
}

/** Writes one format's stream: each neutral part into whole server-sent events ('' for none). */
export interface StreamWriter {
  write(part: StreamPart): string;
  /** What ends the stream once the upstream's has ended (`data: [DONE]`). */
  end(): string;
}

/** A request one format's wire shape cannot carry: 400, naming the parameter. */
export function untranslatable(param: string, target: string): GatewayError {
  return errors.invalidRequest(`'${param}' cannot be sent to this model: its provider speaks ${target}, which has no equivalent`);
}

/** A value the reader cannot understand: 400, naming where it is. */
export function invalid(param: string, what: string): GatewayError {
  return errors.invalidRequest(`'${param}' ${what}`);
}

export const sse = (data: unknown, event?: string) => `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`;

/** The answer's text parts joined; tool calls and reasoning left out. */
export const textOf = (parts: readonly Part[]) =>
  parts
    .filter((part): part is Extract<Part, { type: 'text' }> => part.type === 'text')
    .map((part) => part.text)
    .join('');
