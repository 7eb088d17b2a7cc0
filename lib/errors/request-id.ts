import { randomBytes } from 'node:crypto';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
// 248 = 4 * 62: bytes at or above it are dropped so every character is equally likely.
const UNBIASED_LIMIT = 248;

// Random bytes are drawn from a pool refilled 4 KiB at a time: one randomBytes call per request
// cost about 8 µs. Used bytes are zeroed, so the pool never holds a byte that was handed out.
const POOL_BYTES = 4096;
let pool: Buffer | undefined;
let poolOffset = POOL_BYTES;

/** The pool with at least `count` unused bytes from `poolOffset` on. */
function poolWith(count: number): Buffer {
  if (pool === undefined || poolOffset + count > POOL_BYTES) {
    pool = randomBytes(POOL_BYTES);
    poolOffset = 0;
  }
  return pool;
}

function nextRandomByte(): number {
  const bytes = poolWith(1);
  const byte = bytes[poolOffset] as number;
  bytes[poolOffset] = 0;
  poolOffset += 1;
  return byte;
}

/**
 * `length` characters of [A-Za-z0-9] from the CSPRNG, without modulo bias.
 * @example randomAlphanumeric(24) // 'q3ZkR0bY7vW1sLxN9aPcE2tD'
 */
export function randomAlphanumeric(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = nextRandomByte();
    if (byte < UNBIASED_LIMIT) out += ALPHANUMERIC[byte % 62];
  }
  return out;
}

const REQUEST_ID_BYTES = 16;

/**
 * A request id: `req_` + 32 lowercase hex digits (128 bits), as OpenAI's own request ids.
 * @example ctx.set('x-request-id', newRequestId())
 */
export function newRequestId(): string {
  const bytes = poolWith(REQUEST_ID_BYTES);
  const end = poolOffset + REQUEST_ID_BYTES;
  const id = `req_${bytes.toString('hex', poolOffset, end)}`;
  bytes.fill(0, poolOffset, end);
  poolOffset = end;
  return id;
}
