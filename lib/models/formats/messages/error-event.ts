import { shapeBBody } from '../../../errors/anthropic-errors.js';
import type { GatewayError } from '../../../errors/gateway-error.js';

/**
 * A failure after the stream has started, as a Messages stream tells one, with the Shape B body:
 * `event: error` with `{"type":"error","error":{...}}`.
 * @example res.write(anthropicErrorEvent(errors.upstreamTimeout(), ctx.state.requestId))
 */
export function anthropicErrorEvent(err: GatewayError, requestId: string): string {
  return `event: error\ndata: ${JSON.stringify(shapeBBody(err, requestId))}\n\n`;
}
