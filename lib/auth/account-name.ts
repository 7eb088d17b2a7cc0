import { isPrintableText } from '../printable-text.js';

/** The longest account name, in characters (Unicode code points, as PostgreSQL's varchar counts them). */
export const MAX_ACCOUNT_NAME_LENGTH = 255;

/**
 * What a valid account name is, for error messages.
 * @example throw new UsageError(`--account ${ACCOUNT_NAME_RULE}`)
 */
export const ACCOUNT_NAME_RULE = `must be 1 to ${MAX_ACCOUNT_NAME_LENGTH} characters of well-formed Unicode, without control or format characters, and not . or ..`;

/**
 * The account name `input` stands for: trimmed and in Unicode NFC, so that one name typed as
 * composed or decomposed characters is one account; `undefined` when it is empty, longer than 255
 * characters, or holds a control or format character (the file names' rule), a lone surrogate, or
 * U+FFFD (what bytes that were not UTF-8 were decoded to: two different such names would become
 * one account), and when it is `.` or `..`, which no URL path can carry (a browser resolves them,
 * `%2E%2E` too, as folders: `/accounts/..` would be `/`). The admin API, the CLI and the key
 * stores all go by it.
 * @example const account = canonicalAccountName(body.account) ?? fail('invalid account')
 */
export function canonicalAccountName(input: string): string | undefined {
  if (typeof input !== 'string') return undefined;
  const name = input.trim();
  if (!isPrintableText(name) || name === '.' || name === '..') return undefined;
  const canonical = name.normalize('NFC');
  const length = [...canonical].length;
  return length >= 1 && length <= MAX_ACCOUNT_NAME_LENGTH ? canonical : undefined;
}

/**
 * Throws a `TypeError` unless `account` is an account name in its canonical form
 * (`canonicalAccountName(account) === account`): what a key store checks before it writes.
 */
export function assertCanonicalAccountName(account: string): void {
  if (canonicalAccountName(account) !== account) {
    throw new TypeError(`koa-model-gateway: an account name ${ACCOUNT_NAME_RULE}, trimmed and in Unicode NFC`);
  }
}
