import type { GatewayError } from '../../../errors/gateway-error.js';

/**
 * A failure after the stream has started, as the Responses API tells one: `event: error` with
 * `{"type":"error","code","message","param","sequence_number"}`. The gateway does not count the
 * upstream's events, so `sequence_number` is 0; it is the stream's last event whatever its number.
 */
export function responsesErrorEvent(err: GatewayError): string {
  const data = { type: 'error', code: err.code, message: err.message, param: null, sequence_number: 0 };
  return `event: error\ndata: ${JSON.stringify(data)}\n\n`;
}
