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
