import type { IncomingHttpHeaders } from 'node:http';

// Scheme case-insensitive, exactly one space, one token with no spaces in it.
const BEARER = /^bearer ([^\s]+)$/i;

/**
 * The API key of a request, per api.md section 5: an `x-api-key` that is present and not blank
 * wins and `Authorization` is then ignored; otherwise `Authorization: Bearer <key>`. Returns
 * `undefined` for no key or a malformed `Authorization` value.
 * @example apiKey({ store, getKey: (ctx) => extractApiKey(ctx.headers) ?? ctx.cookies.get('api_key') })
 */
export function extractApiKey(headers: IncomingHttpHeaders): string | undefined {
  const apiKey = headers['x-api-key'];
  const fromHeader = (Array.isArray(apiKey) ? apiKey[0] : apiKey)?.trim();
  if (fromHeader) return fromHeader;
  const authorization = headers.authorization;
  if (authorization === undefined) return undefined;
  return BEARER.exec(authorization)?.[1];
}
