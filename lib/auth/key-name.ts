import { canonicalName } from '../printable-text.js';

/** The longest key name, in characters (Unicode code points, as PostgreSQL's varchar counts them). */
export const MAX_KEY_NAME_LENGTH = 100;

/**
 * What a valid key name is, for error messages.
 * @example throw new UsageError(`--name ${KEY_NAME_RULE}`)
 */
export const KEY_NAME_RULE = `must be 1 to ${MAX_KEY_NAME_LENGTH} printable characters`;

/**
 * The key name `input` stands for, trimmed and in Unicode NFC; `undefined` when it is empty,
 * longer than 100 characters or not printable text (`isPrintableText`, the rule of file and
 * account names): a name is shown and logged as it reads. The admin API and the CLI go by it.
 * @example const name = canonicalKeyName(body.name) ?? fail('invalid name')
 */
export function canonicalKeyName(input: string): string | undefined {
  return canonicalName(input, MAX_KEY_NAME_LENGTH);
}
