import { performance } from 'node:perf_hooks';
import { propagation, SpanKind, trace, SpanStatusCode, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { AttemptStart, AttemptTrace } from '../state.js';
import { isObject } from '../models/content.js';
import { FORMATS } from '../models/formats/registry.js';
import type { ProviderAnswer } from '../models/provider.js';
import { eventFields, EventSplitter } from '../http/server-sent-events.js';
import { AnswerReader, inputAttributes } from './answer-reader.js';

const EVENT_STREAM = /^text\/event-stream\b/i;
const STOP_SEQUENCES = 'gen_ai.request.stop_sequences';

/** The attributes known when an attempt starts, which samplers may read. */
function startAttributes({ endpoint, provider, model, body, stream }: AttemptStart): Attributes {
  const telemetry = provider.telemetry;
  const attributes: Attributes = {
    'gen_ai.operation.name': FORMATS[endpoint].operation,
    'gen_ai.provider.name': telemetry?.providerName ?? provider.id,
    'kmg.provider.id': provider.id,
    'kmg.model': model,
  };
  if (typeof body.model === 'string') attributes['gen_ai.request.model'] = body.model;
  if (stream) attributes['gen_ai.request.stream'] = true;
  if (telemetry?.serverAddress !== undefined) attributes['server.address'] = telemetry.serverAddress;
  if (telemetry?.serverPort !== undefined) attributes['server.port'] = telemetry.serverPort;
  for (const [field, name] of Object.entries(FORMATS[endpoint].trace.parameters)) {
    const value = body[field];
    if (typeof value === 'number') attributes[name] = value;
    else if (name !== STOP_SEQUENCES) continue;
    else if (typeof value === 'string') attributes[name] = [value];
    else if (Array.isArray(value) && value.every((item) => typeof item === 'string')) attributes[name] = value as string[];
  }
  return attributes;
}

/**
 * The CLIENT span of one upstream attempt, named `{gen_ai.operation.name} {gen_ai.request.model}`,
 * with the GenAI conventions' attributes: those of the request when it starts, those of the
 * answer (read from the answer's own bytes, only when the span is sampled) when it ends.
 */
export class AttemptSpan implements AttemptTrace {
  readonly headers: Record<string, string> = {};
  readonly #span: Span;
  readonly #startedAt = performance.now();
  readonly #reader: AnswerReader | undefined;
  #splitter: EventSplitter | undefined;
  /** A JSON answer's chunks, parsed at its end. */
  #jsonChunks: Buffer[] | undefined;
  #firstChunk = true;
  #failed = false;
  #ended = false;

  constructor(tracer: Tracer, parent: Context, start: AttemptStart, recordContent: boolean) {
    const attributes = startAttributes(start);
    const name = `${attributes['gen_ai.operation.name'] as string} ${(attributes['gen_ai.request.model'] as string | undefined) ?? start.model}`;
    this.#span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
    if (!this.#span.isRecording()) {
      // Unsampled: the context is still passed on (its flags say so), nothing is read.
      propagation.inject(parent, this.headers);
      return;
    }
    propagation.inject(trace.setSpan(parent, this.#span), this.headers);
    this.#reader = new AnswerReader(start.endpoint, recordContent);
    if (recordContent) this.#span.setAttributes(inputAttributes(start.body));
  }

  answered(answer: ProviderAnswer): void {
    if (answer.statusCode < 200 || answer.statusCode > 299) {
      this.failed(String(answer.statusCode));
      return;
    }
    if (this.#reader === undefined) return;
    const type = answer.headers['content-type'];
    if (EVENT_STREAM.test(Array.isArray(type) ? (type[0] ?? '') : (type ?? ''))) this.#splitter = new EventSplitter();
    else this.#jsonChunks = [];
  }

  chunk(chunk: Buffer | string): void {
    if (this.#firstChunk) {
      this.#firstChunk = false;
      if (this.#splitter) this.#span.setAttribute('gen_ai.response.time_to_first_chunk', (performance.now() - this.#startedAt) / 1000);
    }
    if (this.#splitter) this.#events(this.#splitter.push(chunk));
    else this.#jsonChunks?.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  }

  failed(errorType: string): void {
    if (this.#failed || this.#ended) return;
    this.#failed = true;
    this.#span.setAttribute('error.type', errorType);
    this.#span.setStatus({ code: SpanStatusCode.ERROR });
  }

  end(): void {
    if (this.#ended) return;
    const reader = this.#reader;
    if (reader) {
      if (this.#splitter) this.#events(this.#splitter.end());
      if (this.#jsonChunks && this.#jsonChunks.length > 0 && !this.#failed) this.#json(reader);
      this.#span.setAttributes(reader.attributes());
    }
    this.#ended = true;
    this.#span.end();
  }

  #json(reader: AnswerReader): void {
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(this.#jsonChunks as Buffer[]).toString('utf8'));
    } catch {
      // Left undefined: malformed, as the call finds it after the span has ended.
    }
    if (isObject(body)) reader.json(body);
    else this.failed('malformed_answer');
  }

  #events(events: string[]): void {
    for (const event of events) {
      const { data } = eventFields(event);
      if (data === undefined || data === '[DONE]') continue;
      try {
        const parsed: unknown = JSON.parse(data);
        if (isObject(parsed)) this.#reader?.event(parsed);
      } catch {
        // An event that is not JSON has nothing for the trace.
      }
    }
  }
}
