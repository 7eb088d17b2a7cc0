import { randomBytes } from 'node:crypto';

/**
 * The 64 characters of a file id in ASCII order, so that comparing ids byte by byte compares the
 * creation time encoded in their first characters.
 */
const SORTED_ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
/**
 * Ids of the first format began with the creation second in 6 characters, `0` for every second
 * from 2004 to 2038; this mark sorts after it, so every id of this format follows every older one.
 */
const FORMAT_MARK = '1';
const TIME_CHARS = 8; // 64^8 milliseconds: until the year 10889
const RANDOM_CHARS = 23; // 138 bits from the CSPRNG
const RANDOM_LIMIT = 1n << BigInt(RANDOM_CHARS * 6);
const TIME_LIMIT = 64 ** TIME_CHARS;

const FILE_ID_PATTERN = /^file-[A-Za-z0-9_-]{32}$/;

/**
 * True for a well-formed file id (`file-` + 32 of `[A-Za-z0-9_-]`), whether or not it exists.
 * @example if (!isFileId(ctx.params.file_id)) throw errors.invalidFileId()
 */
export function isFileId(value: string): boolean {
  return FILE_ID_PATTERN.test(value);
}

function encode(value: bigint, chars: number): string {
  let text = '';
  for (let i = 0; i < chars; i++, value >>= 6n) text = SORTED_ALPHABET[Number(value & 63n)] + text;
  return text;
}

const randomBits = (bytes: number) => BigInt(`0x${randomBytes(bytes).toString('hex')}`);
/** A fresh random part: 144 bits drawn, 138 kept. */
const freshRandom = () => randomBits(18) & (RANDOM_LIMIT - 1n);

// The last id this process issued: the next one must sort after it.
let last = { ms: -1, random: 0n };

/**
 * A new file id, `file-` + 32 of `[A-Za-z0-9_-]`: a format mark, the creation time in milliseconds,
 * then 138 random bits. Byte order of ids is creation order, so a list cursor is just an id
 * comparison: it needs no lookup and works for deleted or foreign ids alike. Ids issued by one
 * process are strictly increasing, as ULID's monotonic factory makes them: an id asked for within
 * the millisecond of the last one (or before it, when the clock stepped back) keeps that time and
 * adds a random step of up to 2^64 to its random part, so it sorts after and still cannot be
 * guessed from it.
 * @example const record = { id: newFileId(Date.now() / 1000), account, filename, bytes, createdAt, expiresAt: null }
 * @param createdAt Unix seconds, with the milliseconds as a fraction
 */
export function newFileId(createdAt: number): string {
  let ms = Math.round(createdAt * 1000);
  if (!(ms >= 0 && ms < TIME_LIMIT)) throw new RangeError(`koa-model-gateway: newFileId: no file id for the time ${createdAt}`);
  let random: bigint;
  if (ms > last.ms) {
    random = freshRandom();
  } else {
    ms = last.ms;
    random = last.random + 1n + randomBits(8);
    // Past the largest random part (about once in 2^74 ids of one millisecond): the next millisecond.
    if (random >= RANDOM_LIMIT) [ms, random] = [ms + 1, freshRandom()];
  }
  last = { ms, random };
  return `file-${FORMAT_MARK}${encode(BigInt(ms), TIME_CHARS)}${encode(random, RANDOM_CHARS)}`;
}
