import { randomAlphanumeric } from '../random.js';

/**
 * A request id: `req_` + 32 alphanumerics (190 bits), as decisions.md gives them.
 * @example ctx.set('x-request-id', newRequestId())
 */
export function newRequestId(): string {
  return `req_${randomAlphanumeric(32)}`;
}
