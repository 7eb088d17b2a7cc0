import { randomBytes } from 'node:crypto';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
// 248 = 4 * 62: bytes at or above it are dropped so every character is equally likely.
const UNBIASED_LIMIT = 248;

/** `length` characters of [A-Za-z0-9] from the CSPRNG, without modulo bias. */
export function randomAlphanumeric(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < UNBIASED_LIMIT && out.length < length) out += ALPHANUMERIC[byte % 62];
    }
  }
  return out;
}

/** A request id: `req_` + 32 alphanumerics. */
export function newRequestId(): string {
  return `req_${randomAlphanumeric(32)}`;
}
