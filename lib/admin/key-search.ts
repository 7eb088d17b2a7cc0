import { z } from 'zod';
import type { ApiKeyRecord } from '../auth/key-store.js';

const SEARCH = 'must be 1 to 255 characters';

/** `GET /keys?q=`: the text a key's account, id or name starts with. */
export const keySearch = z.string({ error: SEARCH }).trim().min(1, { error: SEARCH }).max(255, { error: SEARCH });

/**
 * Whether a key's account, id or name starts with `text`, regardless of case: what an operator
 * types to find a key (`acme`, `key_3Fq`, `billing`).
 * @example records.filter(keyMatcher('acme'))
 */
export function keyMatcher(text: string): (record: ApiKeyRecord) => boolean {
  const prefix = text.normalize('NFC').toLowerCase();
  return (record) => [record.account, record.id, record.name ?? ''].some((field) => field.toLowerCase().startsWith(prefix));
}
