import type { GatewayError } from '../../../errors/gateway-error.js';
import { shapeABody } from '../../../errors/openai-errors.js';

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
