import { shapeBBody } from '../errors/anthropic-errors.js';
import type { GatewayError } from '../errors/gateway-error.js';
import { shapeABody } from '../errors/openai-errors.js';

const EVENT_ENDS = ['\n\n', '\r\n\r\n', '\r\r'];

/** Where the last complete event of `text` ends (after its blank line), or 0 when none has. */
function lastEventEnd(text: string): number {
  return Math.max(...EVENT_ENDS.map((end) => {
    const at = text.lastIndexOf(end);
    return at === -1 ? 0 : at + end.length;
  }));
}

/**
 * Regroups an upstream's event-stream bytes into runs of whole events, passed on as soon as each
 * is complete. Holding back only a partial event means an error event written after a failure
 * never lands in the middle of one. Whatever is left when the upstream ends normally is passed on
 * as it is.
 */
export async function* wholeEvents(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of chunks) {
    pending += decoder.decode(chunk, { stream: true });
    const end = lastEventEnd(pending);
    if (end === 0) continue;
    yield pending.slice(0, end);
    pending = pending.slice(end);
  }
  pending += decoder.decode();
  if (pending !== '') yield pending;
}

// Once a stream has started, its status and headers are sent and the error formatters cannot
// answer any more: a failure is told in the stream, with the formatters' own bodies, in the
// event form each SDK turns into its APIError.

/**
 * A Shape A error as a Chat Completions stream event: `data: {"error":{...}}`.
 * @example res.write(openAIErrorEvent(errors.upstreamError()))
 */
export function openAIErrorEvent(err: GatewayError): string {
  return `data: ${JSON.stringify(shapeABody(err))}\n\n`;
}

/**
 * A Shape B error as a Messages stream event: `event: error` with `{"type":"error","error":{...}}`.
 * @example res.write(anthropicErrorEvent(errors.upstreamTimeout(), ctx.state.requestId))
 */
export function anthropicErrorEvent(err: GatewayError, requestId: string): string {
  return `event: error\ndata: ${JSON.stringify(shapeBBody(err, requestId))}\n\n`;
}

// A blank line ends an event; a line ends in \r\n, \n or a lone \r.
const EVENT_END = /(?:\r\n|\r(?!\n)|\n){2}/g;
const LINE_END = /\r\n|\r|\n/;

/**
 * The events of a run `wholeEvents()` yields, each with the blank line that ends it; what follows
 * the last blank line (only at the end of a stream) is one more event.
 */
export function splitEvents(run: string): string[] {
  const events: string[] = [];
  let start = 0;
  for (const match of run.matchAll(EVENT_END)) {
    const end = match.index + match[0].length;
    events.push(run.slice(start, end));
    start = end;
  }
  if (start < run.length) events.push(run.slice(start));
  return events;
}

/** The fields of one event a format reads: its `event:` name and its `data:` (lines joined with \n). */
export interface EventFields {
  name: string | undefined;
  data: string | undefined;
}

const fieldValue = (line: string, field: string) => line.slice(line.charCodeAt(field.length) === 0x20 ? field.length + 1 : field.length);

export function eventFields(event: string): EventFields {
  let name: string | undefined;
  let data: string | undefined;
  for (const line of event.split(LINE_END)) {
    if (line.startsWith('data:')) {
      const value = fieldValue(line, 'data:');
      data = data === undefined ? value : `${data}\n${value}`;
    } else if (line.startsWith('event:')) {
      name = fieldValue(line, 'event:');
    }
  }
  return { name, data };
}

/** `event` with its data replaced by `data` (one line, as JSON is): its other fields kept, in order. */
export function withData(event: string, data: string): string {
  const kept = event.split(LINE_END).filter((line) => line !== '' && !line.startsWith('data:'));
  kept.push(`data: ${data}`);
  return `${kept.join('\n')}\n\n`;
}
