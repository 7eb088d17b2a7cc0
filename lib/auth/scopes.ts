/** Every scope of api.md section 5, one per operation group. */
export const SCOPES = [
  'chat:completions',
  'messages:create',
  'models:read',
  'files:write',
  'files:read',
  'files:delete',
] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}
