import type { ParsedUrlQuery } from 'node:querystring';
import { errors, type GatewayError } from '../errors/gateway-error.js';
import { isFileId } from './file-id.js';
import type { ListQuery } from './file-store.js';

/** api.md section 8: the default and the largest page of GET /v1/files. */
const MAX_LIST_LIMIT = 10_000;
/** Anthropic's page of GET /v1/files: 20 by default, at most 1,000 (as its models list). */
const ANTHROPIC_DEFAULT_LIMIT = 20;
const ANTHROPIC_MAX_LIMIT = 1000;
/** Anthropic's `ids` filter: at most this many ids, after de-duplication. */
const MAX_IDS = 100;

/** The parameter's value; given more than once, it is invalid. */
function single(params: ParsedUrlQuery, name: string, invalid: () => GatewayError): string | undefined {
  const value = params[name];
  if (Array.isArray(value)) throw invalid();
  return value;
}

function parseLimit(value: string | undefined, defaultLimit: number, maxLimit: number): number {
  if (value === undefined) return defaultLimit;
  const limit = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
  if (!(limit >= 1 && limit <= maxLimit)) throw errors.invalidLimit(maxLimit);
  return limit;
}

/** A cursor parameter: absent, or a well-formed file id (400 `Invalid file ID` otherwise). */
function cursor(params: ParsedUrlQuery, name: string): string | undefined {
  const value = single(params, name, errors.invalidFileId);
  if (value !== undefined && !isFileId(value)) throw errors.invalidFileId();
  return value;
}

/**
 * The `order`, `limit` and `after` of GET /v1/files, validated in that order: 400
 * `invalid_order`, `invalid_limit` or `invalid_file_id`. Other parameters are ignored.
 * @example const query = listQuery(ctx.query)
 */
export function listQuery(params: ParsedUrlQuery): ListQuery {
  const order = single(params, 'order', errors.invalidOrder) ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw errors.invalidOrder();
  const limit = parseLimit(
    single(params, 'limit', () => errors.invalidLimit(MAX_LIST_LIMIT)),
    MAX_LIST_LIMIT,
    MAX_LIST_LIMIT,
  );
  const after = cursor(params, 'after');
  return after === undefined ? { order, limit } : { order, limit, after };
}

/** A list request in Anthropic's shape: a page of the store's list, or the files named by `ids`. */
export interface AnthropicListQuery {
  query: ListQuery | { ids: string[] };
  /** True for `before_id`: the store lists oldest first from it, the answer shows the page newest first. */
  backwards: boolean;
}

/** The `ids` filter as Anthropic's SDK sends it (`ids[]=`, or `ids=`), de-duplicated; undefined when absent. */
function idsFilter(params: ParsedUrlQuery): string[] | undefined {
  const sent = [params['ids[]'], params.ids].flat().filter((value) => value !== undefined);
  if (sent.length === 0) return undefined;
  const ids = [...new Set(sent)];
  if (!ids.every(isFileId)) throw errors.invalidFileId();
  if (ids.length > MAX_IDS) throw errors.invalidRequest(`'ids' holds at most ${MAX_IDS} file ids`);
  return ids;
}

/**
 * The `limit`, `after_id`, `before_id`, `page` and `ids` of GET /v1/files in Anthropic's shape,
 * newest first: `limit` 1 to 1,000 (default 20); at most one cursor, each a file id: `after_id`
 * and `page` (the `next_page` of the page before) give the files just older than it, `before_id`
 * the `limit` files just newer. `ids` (up to 100 file ids) asks for those files alone, in one page,
 * and takes neither `limit` nor a cursor. Other parameters (`beta=true`) are ignored.
 * @example const list = anthropicListQuery(ctx.query)
 */
export function anthropicListQuery(params: ParsedUrlQuery): AnthropicListQuery {
  const rawLimit = single(params, 'limit', () => errors.invalidLimit(ANTHROPIC_MAX_LIMIT));
  const limit = parseLimit(rawLimit, ANTHROPIC_DEFAULT_LIMIT, ANTHROPIC_MAX_LIMIT);
  const cursors = { after_id: cursor(params, 'after_id'), before_id: cursor(params, 'before_id'), page: cursor(params, 'page') };
  const given = Object.entries(cursors).filter(([, value]) => value !== undefined);
  const ids = idsFilter(params);
  if (ids !== undefined) {
    if (rawLimit !== undefined || given.length > 0) throw errors.invalidRequest("'ids' cannot be given with 'limit', 'after_id', 'before_id' or 'page'");
    return { query: { ids }, backwards: false };
  }
  if (given.length > 1)
    throw errors.invalidRequest(`Only one of 'after_id', 'before_id' and 'page' may be given, got ${given.map(([name]) => `'${name}'`).join(' and ')}`);
  const after = cursors.after_id ?? cursors.page;
  if (after !== undefined) return { query: { order: 'desc', limit, after }, backwards: false };
  if (cursors.before_id !== undefined) return { query: { order: 'asc', limit, after: cursors.before_id }, backwards: true };
  return { query: { order: 'desc', limit }, backwards: false };
}
