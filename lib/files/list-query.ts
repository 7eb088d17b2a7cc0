import type { ParsedUrlQuery } from 'node:querystring';
import { errors, type GatewayError } from '../errors/gateway-error.js';
import { isFileId } from './file-id.js';
import type { ListQuery } from './file-store.js';

/** api.md section 8: the default and the largest page of GET /v1/files. */
const MAX_LIST_LIMIT = 10_000;

/** The parameter's value; given more than once, it is invalid. */
function single(params: ParsedUrlQuery, name: string, invalid: () => GatewayError): string | undefined {
  const value = params[name];
  if (Array.isArray(value)) throw invalid();
  return value;
}

function parseLimit(value: string | undefined): number {
  if (value === undefined) return MAX_LIST_LIMIT;
  const limit = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
  if (!(limit >= 1 && limit <= MAX_LIST_LIMIT)) throw errors.invalidLimit(MAX_LIST_LIMIT);
  return limit;
}

/**
 * The `order`, `limit` and `after` of GET /v1/files, validated in that order: 400
 * `invalid_order`, `invalid_limit` or `invalid_file_id`. Other parameters are ignored.
 * @example const query = listQuery(ctx.query)
 */
export function listQuery(params: ParsedUrlQuery): ListQuery {
  const order = single(params, 'order', errors.invalidOrder) ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw errors.invalidOrder();
  const limit = parseLimit(single(params, 'limit', () => errors.invalidLimit(MAX_LIST_LIMIT)));
  const after = single(params, 'after', errors.invalidFileId);
  if (after === undefined) return { order, limit };
  if (!isFileId(after)) throw errors.invalidFileId();
  return { order, limit, after };
}
