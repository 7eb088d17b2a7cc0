import test from 'ava';
import { extractApiKey } from '../../lib/auth/extract-api-key.js';

const KEY = 'kmg_sk_abc';

const cases: Array<[string, Record<string, string>, string | undefined]> = [
  ['x-api-key alone', { 'x-api-key': KEY }, KEY],
  ['Bearer alone', { authorization: `Bearer ${KEY}` }, KEY],
  ['scheme is case-insensitive', { authorization: `bearer ${KEY}` }, KEY],
  ['scheme in capitals', { authorization: `BEARER ${KEY}` }, KEY],
  ['x-api-key wins over a valid Bearer', { 'x-api-key': KEY, authorization: 'Bearer other' }, KEY],
  ['x-api-key wins over a malformed Authorization', { 'x-api-key': KEY, authorization: 'Basic dXNlcg==' }, KEY],
  ['x-api-key is trimmed', { 'x-api-key': `  ${KEY}\t` }, KEY],
  ['empty x-api-key falls back to Bearer', { 'x-api-key': '', authorization: `Bearer ${KEY}` }, KEY],
  ['blank x-api-key falls back to Bearer', { 'x-api-key': '   ', authorization: `Bearer ${KEY}` }, KEY],
  ['no header at all', {}, undefined],
  ['blank x-api-key alone', { 'x-api-key': ' ' }, undefined],
  ['Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }, undefined],
  ['Bearer without a token', { authorization: 'Bearer' }, undefined],
  ['Bearer and a space only', { authorization: 'Bearer ' }, undefined],
  ['two spaces', { authorization: `Bearer  ${KEY}` }, undefined],
  ['extra parts', { authorization: `Bearer ${KEY} extra` }, undefined],
  ['token without scheme', { authorization: KEY }, undefined],
  ['another scheme named like Bearer', { authorization: `Bearerx ${KEY}` }, undefined],
];

for (const [title, headers, expected] of cases) {
  test(`extractApiKey: ${title}`, (t) => {
    t.is(extractApiKey(headers), expected);
  });
}
