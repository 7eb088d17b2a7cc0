import { randomInt } from 'node:crypto';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * `length` characters of [A-Za-z0-9] from the CSPRNG, each equally likely: `crypto.randomInt`
 * draws without modulo bias, from random bytes Node keeps cached.
 * @example const id = `key_${randomAlphanumeric(24)}` // 'key_q3ZkR0bY7vW1sLxN9aPcE2tD'
 */
export function randomAlphanumeric(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHANUMERIC[randomInt(ALPHANUMERIC.length)];
  return out;
}
