import type { Scope } from '../../auth/scopes.js';
import type { JsonObject } from '../content.js';
import type { EndpointFormat } from '../endpoint-format.js';
import type { TokenUsage } from '../../usage/token-usage.js';
import type { ProviderEndpoint } from '../provider.js';
import type { WireFormat } from './wire-format.js';

/**
 * Everything the gateway knows of one client format, in one place: the folder of the format
 * declares it (its `index.ts`), `FORMATS` (registry.ts) lists it, and the relay, the catalog, the
 * models router, tracing, metering and the provider contract suite read it from there. Nothing
 * outside the folder reads the format's field names.
 */
export interface Format extends EndpointFormat {
  /** Its name in messages: "Chat Completions". */
  readonly name: string;
  readonly endpoint: ProviderEndpoint;
  /** Its API path, served by `modelsRouter()` and named in an upstream's missing-path error. */
  readonly path: string;
  /** The scope a key needs to call it. */
  readonly scope: Scope;
  /** Its `gen_ai.operation.name` in traces. */
  readonly operation: string;
  /** What translation reads and writes in this format; absent for one never translated (embeddings, token counts). */
  readonly translation?: WireFormat;
  /** Its one usage reader: a `usage` object of its answers as counts, which metering, cost and tracing read alike. */
  readonly readUsage: (usage: unknown) => TokenUsage;
  /** What a trace records of its answers, read from a whole answer or event by event. */
  readonly trace: AnswerTrace;
  /** A smallest call, and what its answer must be: what `providerContract()` sends in this format. */
  readonly sample: FormatSample;
}

/** A smallest call of one format, and how to tell that its answer is one. */
export interface FormatSample {
  readonly headers: Readonly<Record<string, string>>;
  request(model: string, stream: boolean): JsonObject;
  /** What a JSON answer of this format is, and a check of it. */
  readonly answer: readonly [description: string, check: (body: JsonObject) => boolean];
  /** Whether its answers name the model (the catalog id, once through the gateway). */
  readonly namesModel: boolean;
  /** The data of the event that ends a complete stream; null for a format that never streams. */
  readonly ends: ((data: string) => boolean) | null;
  /** Shape A (`{ error: { message } }`) or Shape B (`{ type: 'error', error: { message } }`) errors. */
  readonly shapeB: boolean;
}

/** A format that translation reads and writes. */
export interface TranslatedFormat extends Format {
  readonly translation: WireFormat;
}

/** What a trace records of a call in one format: its request's parameters, and its answer (`gen_ai.response.*`, `gen_ai.usage.*`, the output text). */
export interface AnswerTrace {
  /**
   * The request body's fields a trace records, by their GenAI attribute names: a number as it is,
   * stop sequences (`gen_ai.request.stop_sequences`) as a string or an array of strings.
   */
  readonly parameters: Readonly<Record<string, string>>;
  /** A whole (not streamed) answer. */
  json(body: JsonObject, into: TracedAnswer): void;
  /** The data of one stream event, parsed. */
  event(data: JsonObject, into: TracedAnswer): void;
}

/** Where a format's `AnswerTrace` puts what it reads. */
export interface TracedAnswer {
  /** The answer's id and model; the first ones told are kept. */
  ids(id: unknown, model: unknown): void;
  finish(reason: unknown, index: number): void;
  /** Output text of the choice at `index`, appended. */
  text(index: number, text: unknown): void;
  /** Counts the answer reports; a later count replaces an earlier one. */
  usage(usage: Partial<TokenUsage>): void;
}
