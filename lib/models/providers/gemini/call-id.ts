import { randomBytes } from 'node:crypto';

// A tool call's thought signature, in its id (docs/DECISIONS.md): Gemini wants it back on the call
// in the next turn, and Chat Completions, whose clients send back only a call's id, name and
// arguments, has no other field for it. It is written in base64url, so that the id keeps to the
// letters, digits, `_` and `-` that tool ids take everywhere (Anthropic's pattern); the first
// separator is the one, since the id before it is Gemini's own or `call_<hex>`.
const SEPARATOR = '__ts_';

/** The id a tool call of Gemini's is given: its own (or a new one), with its signature when it has one. */
export function callId(own: unknown, signature: unknown): string {
  const id = typeof own === 'string' && own !== '' ? own : `call_${randomBytes(8).toString('hex')}`;
  return typeof signature === 'string' && signature !== '' ? `${id}${SEPARATOR}${Buffer.from(signature, 'base64').toString('base64url')}` : id;
}

/** A tool call's id as `callId()` made it: the id, and the signature it carries, in base64 as Gemini gave it. */
export function splitCallId(id: string): { id: string; signature?: string } {
  const at = id.indexOf(SEPARATOR);
  return at < 0 ? { id } : { id: id.slice(0, at), signature: Buffer.from(id.slice(at + SEPARATOR.length), 'base64url').toString('base64') };
}
