import { fetchToken } from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { boundedAnswer } from './upstream.js';

/** A token endpoint's answer is a few fields: 64 KiB is ample. */
const MAX_TOKEN_ANSWER_BYTES = 65_536;

export interface ClientCredentialsOptions {
  /** The authorization server's token endpoint. */
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  /** Space-separated scopes to ask for; default none. */
  scope?: string;
  /** A token is fetched again this long before it expires, in ms. Default 30,000. */
  refreshBeforeMs?: number;
  /** How long a token without `expires_in` is kept, in ms. Default 300,000. */
  defaultLifetimeMs?: number;
  /** The bound on one token request, in ms. Default 10,000. */
  timeoutMs?: number;
  /** Default `Date.now`. */
  nowMs?: () => number;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
}

/**
 * OAuth 2.0 client credentials for an upstream MCP server: a token from `tokenUrl` (the MCP SDK's
 * own client_credentials request, client_secret_basic; bounded by `timeoutMs` and 64 KiB), kept until `refreshBeforeMs` before it
 * expires; requests made while one is being fetched share it, and a failed fetch is not kept.
 * Answers the `Authorization` header, for `httpMcpUpstream({ authorization })`.
 * @example httpMcpUpstream({ id: 'crm', url, authorization: clientCredentials({ tokenUrl, clientId, clientSecret }) })
 */
export function clientCredentials(options: ClientCredentialsOptions): () => Promise<Record<string, string>> {
  const { tokenUrl, clientId, clientSecret, scope, refreshBeforeMs = 30_000, defaultLifetimeMs = 300_000, timeoutMs = 10_000, nowMs = Date.now } = options;
  if (!URL.canParse(tokenUrl)) throw new TypeError('koa-model-gateway: clientCredentials() needs an http(s) tokenUrl');
  const fetchFn = options.fetch ?? fetch;
  const issuer = new URL(tokenUrl).origin;
  const provider = new ClientCredentialsProvider({ clientId, clientSecret, expectedIssuer: issuer, ...(scope !== undefined && { scope }) });
  const metadata = { issuer, token_endpoint: tokenUrl, authorization_endpoint: tokenUrl, response_types_supported: ['token'] };
  const bounded: typeof fetch = async (input, init) =>
    boundedAnswer(await fetchFn(input, { ...init, signal: AbortSignal.timeout(timeoutMs) }), MAX_TOKEN_ANSWER_BYTES);
  let current: { until: number; header: Promise<Record<string, string>> } | undefined;

  return () => {
    const now = nowMs();
    if (current !== undefined && current.until > now) return current.header;
    const header = fetchToken(provider, issuer, { metadata, fetchFn: bounded }).then((tokens) => {
      const lifetime = tokens.expires_in === undefined ? defaultLifetimeMs : tokens.expires_in * 1000;
      if (entry === current) entry.until = now + Math.max(0, lifetime - refreshBeforeMs);
      return { authorization: `Bearer ${tokens.access_token}` };
    });
    // Shared while it is fetched; kept for its lifetime once known.
    const entry = { until: Number.POSITIVE_INFINITY, header };
    current = entry;
    header.catch(() => {
      if (current === entry) current = undefined;
    });
    return header;
  };
}
