import { hash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';
import type { JsonObject } from '../content.js';
import type { ProviderEndpoint } from '../provider.js';

// A CommonJS module whose declarations say `export default`: Node gives its function as the default.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

/** Changed whenever what an entry holds, or how a key is made, changes: older entries are then never read. */
export const CACHE_KEY_VERSION = 2;

/**
 * The request fields that cannot change an answer's content, left out of the key: how it is
 * delivered (`stream`, `stream_options`: a JSON request and a streamed one share an entry), who
 * asks (`user`, `safety_identifier`, `metadata`: the account is in the key already), and the
 * provider's own prompt caching and retention (`prompt_cache_key`, `prompt_cache_retention`,
 * `store`). A deny-list, not an allow-list: a field an API adds tomorrow changes the key.
 * `model` is left out too: the key has the resolved catalog model in its place.
 */
export const IGNORED_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'stream',
  'stream_options',
  'user',
  'metadata',
  'safety_identifier',
  'prompt_cache_key',
  'prompt_cache_retention',
  'store',
]);

/** What names one cache entry. */
export interface CacheKeyParts {
  account: string;
  /** The key's id, when the key asks for entries of its own; else undefined (shared by its account). */
  keyId?: string | undefined;
  /** The client's endpoint format: an answer is stored in the form its format reads back. */
  endpoint: ProviderEndpoint;
  /** The catalog model the request resolved to. */
  model: string;
  /** The client's request body, as parsed. */
  body: JsonObject;
  /** The client's headers the upstream is sent (`anthropic-beta`, `anthropic-version`): they may change the answer. Default: none. */
  headers?: Readonly<Record<string, string>>;
}

/**
 * The entry's key: SHA-256 (hex) of the schema version, the account, the key's id when it has
 * entries of its own, the endpoint format, the catalog model, the body without
 * `IGNORED_FIELDS` and the client's headers meant for the upstream, canonicalised by RFC 8785 (`canonicalize`: key order and number forms do
 * not matter, `1.0` is `1`).
 * @example cacheKey({ account: 'acme', endpoint: 'chatCompletions', model: 'gpt-4o', body })
 */
export function cacheKey({ account, keyId, endpoint, model, body, headers = {} }: CacheKeyParts): string {
  const kept: JsonObject = {};
  for (const field in body) if (!IGNORED_FIELDS.has(field)) kept[field] = body[field];
  const text = canonicalize([CACHE_KEY_VERSION, account, keyId ?? null, endpoint, model, kept, headers]);
  // One-shot: no Hash object per call.
  return hash('sha256', text ?? '');
}

/**
 * What a call says outside its key, `model` aside (`stream`, `stream_options`, `user`, ...), as
 * text: two calls of one key whose variants are the same text are written the same answer, byte
 * for byte. Not canonicalised: the same fields spelled otherwise are only a variant more.
 */
export function cacheVariant(body: JsonObject): string {
  const asked: JsonObject = {};
  for (const field of IGNORED_FIELDS) if (field !== 'model' && body[field] !== undefined) asked[field] = body[field];
  return JSON.stringify(asked);
}
