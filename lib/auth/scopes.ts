/**
 * Every scope of api.md section 5, one per operation group, `responses:create` and `mcp:call` (decisions.md).
 * @example await createApiKey(store, { prefix: 'kmg', account: 'acme', scopes: [...SCOPES] })
 */
export const SCOPES = [
  'chat:completions',
  'responses:create',
  'messages:create',
  'models:read',
  'files:write',
  'files:read',
  'files:delete',
  'embeddings:create',
  'mcp:call',
] as const;

export type Scope = (typeof SCOPES)[number];

/**
 * True for one of `SCOPES`: for scopes read from configuration or a command line.
 * @example const scopes = input.split(',').filter(isScope)
 */
export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}
