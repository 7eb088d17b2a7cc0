import { randomBytes } from 'node:crypto';

// A tool call's thought signature, in its id (docs/DECISIONS.md): Gemini wants it back on the call
// in the next turn, and Chat Completions, whose clients send back only a call's id, name and
// arguments, has no other field for it. A signature is base64, which has no underscore: the last
// separator is the one.
const SEPARATOR = '__ts_';

/** The id a tool call of Gemini's is given: its own (or a new one), with its signature when it has one. */
export function callId(own: unknown, signature: unknown): string {
  const id = typeof own === 'string' && own !== '' ? own : `call_${randomBytes(8).toString('hex')}`;
  return typeof signature === 'string' && signature !== '' ? `${id}${SEPARATOR}${signature}` : id;
}

/** A tool call's id as `callId()` made it: the id, and the signature it carries. */
export function splitCallId(id: string): { id: string; signature?: string } {
  const at = id.lastIndexOf(SEPARATOR);
  return at < 0 ? { id } : { id: id.slice(0, at), signature: id.slice(at + SEPARATOR.length) };
}
