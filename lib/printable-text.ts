// Control (Cc) and format (Cf) characters, lone surrogates (Cs: with the `u` flag a surrogate
// pair is one code point, so only half a pair matches) and U+FFFD.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\uFFFD]/u;

/**
 * Whether `text` is well-formed Unicode without control or format characters: what a name must
 * be to be stored, logged and shown as it reads. A newline forges a log line, U+202E turns
 * `fdp.exe` around, U+200B hides, and a lone surrogate is stored as bytes that read back as
 * U+FFFD, another name than the one written; U+FFFD itself is what bytes that were not UTF-8 were
 * decoded to (two different names sent so would read alike). The rule of file, key and account
 * names alike.
 */
export function isPrintableText(text: string): boolean {
  return !UNPRINTABLE.test(text);
}

/**
 * The name `input` stands for, trimmed and in Unicode NFC; `undefined` when it is not a string, is
 * empty, is longer than `maxLength` characters (code points, as PostgreSQL's varchar counts them)
 * or is not printable text (`isPrintableText`). The rule of key and admin token names.
 * @example const name = canonicalName(input, 100) ?? fail('invalid name')
 */
export function canonicalName(input: unknown, maxLength: number): string | undefined {
  if (typeof input !== 'string') return undefined;
  const name = input.trim().normalize('NFC');
  if (!isPrintableText(name)) return undefined;
  const length = [...name].length;
  return length >= 1 && length <= maxLength ? name : undefined;
}
