import { randomBytes } from 'node:crypto';
import { tokenCount, unreadableStreamEvent } from '../../answer.js';
import { isObject, type JsonObject } from '../../content.js';
import type { Answer, FinishReason, Part, StreamPart, Usage } from '../../formats/neutral.js';
import { UpstreamStatusError, type ProviderAnswer } from '../../provider.js';
import { answerHeader } from '../../upstream-call.js';
import { callId } from './call-id.js';

// Gemini's answers (`GenerateContentResponse`, whole or one per event of a stream) as neutral ones.

/** Gemini's finish reasons as neutral ones; any other is `other`. */
const FINISH_REASONS: Readonly<Record<string, FinishReason>> = {
  STOP: 'stop',
  MAX_TOKENS: 'length',
  SAFETY: 'content-filter',
  RECITATION: 'content-filter',
  BLOCKLIST: 'content-filter',
  PROHIBITED_CONTENT: 'content-filter',
  SPII: 'content-filter',
  IMAGE_SAFETY: 'content-filter',
};

/** A finish reason, `tool-calls` for a turn that ended on its calls (Gemini says STOP). */
function finishReason(reason: unknown, calls: boolean): FinishReason {
  const finish = typeof reason === 'string' ? (FINISH_REASONS[reason] ?? 'other') : 'other';
  return finish === 'stop' && calls ? 'tool-calls' : finish;
}

/**
 * Gemini's `usageMetadata` as neutral usage: the prompt with the tool-use prompt (cached content
 * included), the output with the thoughts, which Gemini counts apart and bills as output.
 */
export function geminiUsage(metadata: unknown): Usage {
  const counts = isObject(metadata) ? metadata : {};
  const thoughts = tokenCount(counts.thoughtsTokenCount);
  const cached = tokenCount(counts.cachedContentTokenCount);
  return {
    inputTokens: tokenCount(counts.promptTokenCount) + tokenCount(counts.toolUsePromptTokenCount),
    outputTokens: tokenCount(counts.candidatesTokenCount) + thoughts,
    ...(cached > 0 && { cacheReadTokens: cached }),
    ...(thoughts > 0 && { reasoningTokens: thoughts }),
  };
}

const firstCandidate = (body: JsonObject): JsonObject | undefined =>
  Array.isArray(body.candidates) && isObject(body.candidates[0]) ? body.candidates[0] : undefined;

function partsOf(candidate: JsonObject | undefined): JsonObject[] {
  const content = candidate?.content;
  return isObject(content) && Array.isArray(content.parts) ? content.parts.filter(isObject) : [];
}

/** A prompt Gemini blocked answers no candidate, and says why in `promptFeedback`. */
const blocked = (body: JsonObject) => isObject(body.promptFeedback) && typeof body.promptFeedback.blockReason === 'string';

const answerId = (body: JsonObject) => (typeof body.responseId === 'string' ? body.responseId : `gemini-${randomBytes(12).toString('hex')}`);

/**
 * Gemini's parts as neutral ones: a thought's summary as reasoning; a signature on a text part as
 * signed reasoning before it (on the reasoning just before, when it has none), on a call in the
 * call's id; code and media the gateway never asks for are not expected.
 */
function neutralParts(parts: readonly JsonObject[]): Part[] {
  const out: Part[] = [];
  for (const part of parts) {
    const signature = typeof part.thoughtSignature === 'string' && part.thoughtSignature !== '' ? part.thoughtSignature : undefined;
    if (isObject(part.functionCall)) {
      const call = part.functionCall;
      out.push({ type: 'tool-call', id: callId(call.id, signature), name: String(call.name ?? ''), input: JSON.stringify(call.args ?? {}) });
      continue;
    }
    const text = typeof part.text === 'string' ? part.text : '';
    if (part.thought === true) {
      out.push({ type: 'reasoning', text, ...(signature !== undefined && { signature }) });
      continue;
    }
    if (signature !== undefined) {
      const last = out.at(-1);
      if (last?.type === 'reasoning' && last.signature === undefined) last.signature = signature;
      else out.push({ type: 'reasoning', text: '', signature });
    }
    if (text !== '') out.push({ type: 'text', text });
  }
  return out;
}

/** A whole `generateContent` answer, neutral. */
export function geminiAnswer(body: JsonObject): Answer {
  const candidate = firstCandidate(body);
  if (candidate === undefined && !blocked(body)) throw unreadableStreamEvent('an answer without a candidate');
  const content = neutralParts(partsOf(candidate));
  return {
    id: answerId(body),
    model: typeof body.modelVersion === 'string' ? body.modelVersion : '',
    content,
    finishReason:
      candidate === undefined
        ? 'content-filter'
        : finishReason(
            candidate.finishReason,
            content.some((part) => part.type === 'tool-call'),
          ),
    usage: geminiUsage(body.usageMetadata),
    created: Math.floor(Date.now() / 1000),
  };
}

/**
 * Reads a `streamGenerateContent` stream, one answer chunk per event: each chunk's parts into
 * neutral stream parts, as they come. The finish waits for the stream's end, for the usage of the
 * last chunk; a stream that ends without a finish reason has no finish (cut short). An error in the
 * stream (`{ "error": ... }`) is thrown as the upstream's status.
 */
export class GeminiStream {
  #started = false;
  #open: 'text' | 'reasoning' | undefined;
  #calls = false;
  #finish: FinishReason | undefined;
  #usage: Usage = { inputTokens: 0, outputTokens: 0 };

  read(chunk: JsonObject): StreamPart[] {
    if (isObject(chunk.error)) throw geminiError(tokenCount(chunk.error.code) || 500, JSON.stringify(chunk));
    const out: StreamPart[] = [];
    if (!this.#started) {
      this.#started = true;
      const model = typeof chunk.modelVersion === 'string' ? chunk.modelVersion : '';
      out.push({ type: 'start', id: answerId(chunk), model, created: Math.floor(Date.now() / 1000) });
    }
    const candidate = firstCandidate(chunk);
    for (const part of neutralParts(partsOf(candidate))) this.#part(part, out);
    if (chunk.usageMetadata !== undefined) this.#usage = geminiUsage(chunk.usageMetadata);
    if (candidate?.finishReason !== undefined) this.#finish = finishReason(candidate.finishReason, this.#calls);
    else if (candidate === undefined && blocked(chunk)) this.#finish = 'content-filter';
    return out;
  }

  end(): StreamPart[] {
    const out: StreamPart[] = [];
    if (this.#finish === undefined) return out;
    this.#close(out);
    const finish = this.#finish === 'stop' && this.#calls ? 'tool-calls' : this.#finish;
    out.push({ type: 'finish', finishReason: finish, usage: this.#usage });
    return out;
  }

  #close(out: StreamPart[]): void {
    if (this.#open !== undefined) out.push({ type: this.#open === 'text' ? 'text-end' : 'reasoning-end' });
    this.#open = undefined;
  }

  #part(part: Part, out: StreamPart[]): void {
    switch (part.type) {
      case 'text':
        if (this.#open !== 'text') {
          this.#close(out);
          out.push({ type: 'text-start' });
          this.#open = 'text';
        }
        out.push({ type: 'text-delta', delta: part.text });
        return;
      case 'reasoning':
        // A signature seals its thought: a thought after it is another.
        if (this.#open !== 'reasoning') {
          this.#close(out);
          out.push({ type: 'reasoning-start' });
          this.#open = 'reasoning';
        }
        if (part.text !== '') out.push({ type: 'reasoning-delta', delta: part.text });
        if (part.signature !== undefined) {
          out.push({ type: 'reasoning-signature', signature: part.signature });
          this.#close(out);
        }
        return;
      case 'tool-call':
        this.#close(out);
        this.#calls = true;
        out.push(
          { type: 'tool-call-start', id: part.id, name: part.name },
          { type: 'tool-call-delta', id: part.id, delta: part.input },
          { type: 'tool-call-end', id: part.id },
        );
        return;
      default:
        return;
    }
  }
}

const SECONDS = /^\d+$/;
const DELAY = /^(\d+(?:\.\d+)?)s$/;

/**
 * Gemini's error answer (`{ "error": { code, message, status, details } }`) as the upstream's
 * status: its message and status name (`RESOURCE_EXHAUSTED`), and when to retry, from `retry-after`
 * or the `RetryInfo` detail's `retryDelay`, in whole seconds. A key Gemini does not take is its
 * 400 `API_KEY_INVALID`: the gateway's configuration, not the client's request, so a 401.
 */
export function geminiError(status: number, text: string, answer?: ProviderAnswer): UpstreamStatusError {
  let error: JsonObject = {};
  try {
    const body: unknown = JSON.parse(text);
    if (isObject(body) && isObject(body.error)) error = body.error;
  } catch {
    // No API answered (a proxy's page): the status alone tells.
  }
  const details = Array.isArray(error.details) ? error.details.filter(isObject) : [];
  const header = answer ? answerHeader(answer, 'retry-after') : '';
  const delay = details.map((detail) => (typeof detail.retryDelay === 'string' ? DELAY.exec(detail.retryDelay)?.[1] : undefined)).find(Boolean);
  const retryAfter = SECONDS.test(header) ? header : delay === undefined ? undefined : String(Math.ceil(Number(delay)));
  const keyRefused = details.some((detail) => detail.reason === 'API_KEY_INVALID');
  const message = typeof error.message === 'string' && error.message !== '' ? error.message : `Gemini answered HTTP ${status}`;
  return new UpstreamStatusError(keyRefused ? 401 : status, message, {
    ...(typeof error.status === 'string' && { code: error.status }),
    ...(retryAfter !== undefined && { retryAfter }),
  });
}
