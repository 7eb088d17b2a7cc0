import { z } from 'zod';
import type { McpUpstream } from 'koa-model-gateway/mcp';
import { httpBaseUrl, positiveInteger, settingsObject, timerMs } from 'koa-model-gateway/settings';
import { ConfigError } from './config-error.js';

type Environment = Readonly<Record<string, string | undefined>>;

const ENV_NAME = 'must name an environment variable (letters, digits and _)';
const SERVER_ID = 'must be 1 to 64 letters, digits and -, starting with a letter or digit';
const HEADER_NAME = 'must be an HTTP header name';
const envName = z.string({ error: ENV_NAME }).regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: ENV_NAME });
const headerName = z.string({ error: HEADER_NAME }).regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/, { error: HEADER_NAME });

/** How the gateway authenticates to one server: never with the client's key. */
const authSchema = z.discriminatedUnion(
  'type',
  [
    settingsObject({ type: z.literal('none') }),
    /** One header whose value is read from the environment, e.g. `Authorization: Bearer …`. */
    settingsObject({ type: z.literal('header'), header: headerName.default('authorization'), valueEnv: envName }),
    /** OAuth 2.0 client credentials: a token from `tokenUrl`, cached until shortly before it expires. */
    settingsObject({
      type: z.literal('oauth_client_credentials'),
      tokenUrl: httpBaseUrl,
      clientIdEnv: envName,
      clientSecretEnv: envName,
      scope: z.string({ error: 'must be a string of space-separated scopes' }).optional(),
    }),
  ],
  { error: (issue) => (issue.code === 'invalid_union' ? "must be 'none', 'header' or 'oauth_client_credentials'" : 'must be an object') },
);

const mcpServerSchema = settingsObject({
  id: z.string({ error: SERVER_ID }).regex(/^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/, { error: SERVER_ID }),
  url: httpBaseUrl,
  /** Headers sent with every request, not secret: a secret goes in `auth` (`header`), read from the environment. */
  headers: z.record(headerName, z.string({ error: 'must be a string' }), { error: 'must be an object of header names and values' }).optional(),
  auth: authSchema.default({ type: 'none' }),
});

/** `mcpServers` of the config file: the upstream MCP servers behind `/mcp`, ids unique. */
export const mcpServersSchema = z
  .array(mcpServerSchema, { error: 'must be an array' })
  .default([])
  .superRefine((servers, ctx) => {
    const seen = new Set<string>();
    servers.forEach((server, index) => {
      // Unique ids without '__': two servers' tool names can never collide.
      if (seen.has(server.id)) ctx.addIssue({ code: 'custom', path: [index, 'id'], message: `'${server.id}' is the id of another server` });
      seen.add(server.id);
    });
  });

/** `mcp` of the config file: the bounds of the MCP endpoint. */
export const mcpSettingsSchema = settingsObject({
  /** Each server's part of `tools/list`, in ms: a slower server is left out. Default 2,000. */
  listTimeoutMs: timerMs.default(2000),
  /** One `tools/call`, in ms. Default 60,000. */
  callTimeoutMs: timerMs.default(60_000),
  /** The largest request body, in bytes. Default 10 MiB, as model calls. */
  bodyLimit: positiveInteger.default(10 * 1024 * 1024),
});

export type McpServerConfig = z.output<typeof mcpServerSchema>;

function envValue(env: Environment, name: string, server: string, setting: string): string {
  const value = env[name];
  if (!value) throw new ConfigError(`MCP server '${server}': the environment variable ${name} (its ${setting}) is not set`);
  return value;
}

/**
 * The configured MCP servers as upstreams of `mcpGateway()`, credentials read from the environment
 * now (an unset variable is a `ConfigError`). The MCP SDK is loaded only when there is a server.
 */
export async function configuredMcpUpstreams(servers: readonly McpServerConfig[], env: Environment): Promise<McpUpstream[]> {
  if (servers.length === 0) return [];
  const { clientCredentials, httpMcpUpstream } = await import('koa-model-gateway/mcp');
  return servers.map(({ id, url, headers, auth }) => {
    let authorization: (() => Promise<Record<string, string>>) | undefined;
    if (auth.type === 'header') {
      const value = envValue(env, auth.valueEnv, id, 'auth.valueEnv');
      authorization = async () => ({ [auth.header]: value });
    } else if (auth.type === 'oauth_client_credentials') {
      authorization = clientCredentials({
        tokenUrl: auth.tokenUrl,
        clientId: envValue(env, auth.clientIdEnv, id, 'auth.clientIdEnv'),
        clientSecret: envValue(env, auth.clientSecretEnv, id, 'auth.clientSecretEnv'),
        ...(auth.scope !== undefined && { scope: auth.scope }),
      });
    }
    return httpMcpUpstream({ id, url, ...(headers && { headers }), ...(authorization && { authorization }) });
  });
}
