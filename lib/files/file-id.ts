import { randomBytes } from 'node:crypto';

/**
 * The 64 characters of a file id in ASCII order, so that comparing ids byte by byte compares the
 * creation second encoded in their first characters.
 */
const SORTED_ALPHABET = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
const TIME_CHARS = 6; // 64^6 seconds: until the year 4147
const RANDOM_CHARS = 26; // 156 bits from the CSPRNG

const FILE_ID_PATTERN = /^file-[A-Za-z0-9_-]{32}$/;

/**
 * True for a well-formed file id (`file-` + 32 of `[A-Za-z0-9_-]`), whether or not it exists.
 * @example if (!isFileId(ctx.params.file_id)) throw errors.invalidFileId()
 */
export function isFileId(value: string): boolean {
  return FILE_ID_PATTERN.test(value);
}

/**
 * A new file id, `file-` + 32 of `[A-Za-z0-9_-]`: the creation second, then 156 random bits.
 * Byte order of ids is creation order with ties broken by id, so a list cursor is just an id
 * comparison: it needs no lookup and works for deleted or foreign ids alike.
 * @example const record = { id: newFileId(createdAt), account, filename, bytes, createdAt, expiresAt: null }
 */
export function newFileId(createdAt: number): string {
  let time = '';
  for (let rest = Math.floor(createdAt), i = 0; i < TIME_CHARS; i++, rest = Math.floor(rest / 64)) {
    time = SORTED_ALPHABET[rest % 64] + time;
  }
  let random = '';
  for (const byte of randomBytes(RANDOM_CHARS)) random += SORTED_ALPHABET[byte & 63];
  return `file-${time}${random}`;
}
