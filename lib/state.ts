import type { AdminSession } from './admin/admin-session-store.js';
import type { AdminRole, AdminUser } from './admin/admin-user-store.js';
import type { AuditEvent } from './admin/audit-store.js';
import type { KeyCache } from './auth/key-store.js';
import type { Scope } from './auth/scopes.js';
import type { Dialect } from './errors/request-dialect.js';
import type { JsonObject } from './http/json-body.js';
import type { Provider, ProviderAnswer, ProviderEndpoint } from './models/provider.js';
import type { ModelLimits } from './quota/model-limits.js';

// Every key the package's middleware puts on `ctx.state`, one namespaced key each, typed here in
// one place. Types only: any module may import them, whatever its layer (test/package/surface.test.ts).

declare module 'koa' {
  interface DefaultState {
    /** Set by `requestDialect()`, which `gatewayErrors()` runs: the API the request speaks. */
    dialect?: Dialect;
    /** Set by `openAIErrors()` / `anthropicErrors()`: the id of this request, `req_` + 32 alphanumerics. */
    requestId?: string;
    /** Set by `apiKey()`. */
    apiKey?: VerifiedKey;
    /** Set by `adminAuth()`. */
    admin?: VerifiedAdmin;
    /** What an admin handler did, set by the handler for `auditTrail()` to record. */
    audit?: AuditEvent;
    /** Set by `pdfUpload()`. */
    upload?: ValidatedUpload;
    /** Set by `chatCompletions()`, `responses()`, `messages()` and `countTokens()` once the model is resolved. */
    modelRequest?: ModelRequestState;
    /** Set by `traceRequests()`. */
    tracing?: RequestTracing;
  }
}

/** What `apiKey()` puts on `ctx.state.apiKey`. */
export interface VerifiedKey {
  id: string;
  account: string;
  scopes: readonly Scope[];
  /** The model allowlist; `null` means every model. */
  models: readonly string[] | null;
  /** The key's own limits on model calls; absent when it has none (the deployment's defaults apply). */
  limits?: Readonly<ModelLimits>;
  /** On a replacement, the first key of its rotations: its budgets count the spend of them all. */
  originalId?: string;
  /** The key's MCP grant: globs over `{server}/{tool}`; absent when it has none (no tool). */
  mcpTools?: readonly string[];
  /** The key's own response caching; absent when it has none (its models' settings apply). */
  cache?: Readonly<KeyCache>;
}

/** What `adminAuth()` puts on `ctx.state.admin`. */
export interface VerifiedAdmin {
  /** The admin token's id (every change is logged with it); `null` for a person signed in through the OIDC provider. */
  tokenId: string | null;
  /** What the admin token's creator called it; `null` when unnamed, or for a person. */
  tokenName: string | null;
  /** The person signed in through the OIDC provider, when the request came with their session. */
  user?: AdminUser;
  /** What the request may do: `admin` for an admin token, the user's role for a person. */
  role: AdminRole;
  /** The dashboard session the request came with, when it came with one rather than the token. */
  session?: AdminSession;
}

/** A PDF upload that passed every check, on `ctx.state.upload`, for the middleware after `pdfUpload()`. */
export interface ValidatedUpload {
  /**
   * The temp file holding the bytes, finished; removed by `pdfUpload()` once the request is done,
   * unless a later middleware moved it away (`BlobStore.putFile`).
   */
  path: string;
  /** The sanitised file name: a base name ending in `.pdf`. */
  filename: string;
  /** Exact size of the PDF in bytes. */
  bytes: number;
  /** `expires_after[seconds]`, or null when no expiry was asked for. */
  expiresAfterSeconds: number | null;
}

/**
 * What a model handler puts on `ctx.state.modelRequest` once the model is resolved, and fills in
 * as the call goes on: for the request log, the usage record and the metrics.
 */
export interface ModelRequestState {
  /** The catalog id the client asked for. */
  model: string;
  provider: string;
  upstreamModel: string;
  stream: boolean;
  /** How many stored files were attached. */
  attachments: number;
  /** The provider's format when it does not speak the endpoint's and the call is translated. */
  translatedTo?: ProviderEndpoint | 'neutral';
  /** What translation left out of the client's request, by name (the answer's `x-kmg-omitted`); unset when nothing. */
  omitted?: string[];
  /** Set when the key's limits refused the call (429): which of them. */
  limitedBy?: 'requests' | 'tokens' | 'budget';
  /** Tokens of the answer, from the upstream's own usage; 0 until its answer has ended, and when it reported none. */
  inputTokens: number;
  outputTokens: number;
  /** From the upstream call to the first byte of its answer, in ms; null when no upstream call was made. */
  upstreamFirstByteMs: number | null;
  /** From the upstream call to the end of its answer, in ms; null until it has ended, and when no upstream call was made. */
  upstreamMs: number | null;
  /** The answer's tokens at the model's price, in picodollars (`callCost()`); 0 until its answer has ended. */
  costPicoUsd: number;
  /** Every upstream attempt of the call, in order: its deployment, its catalog model (the named one or a fallback) and how it ended (`ok`, `failed`: retryable, `refused`: not). */
  attempts: Array<{ provider: string; model: string; upstreamModel: string; outcome: 'ok' | 'failed' | 'refused' }>;
  /** The providers of the deployments whose failure in this call made them cool down. */
  cooldowns: string[];
  /** How the call met the response cache (`hit`, `miss`, `bypass`, or `error`: a miss because the store failed); unset without one. */
  cache?: 'hit' | 'miss' | 'bypass' | 'error';
  /** On a hit, what the stored answer cost when it was made, in picodollars: what the hit saved. */
  costSavedPicoUsd?: number;
  /** The deployments the call found cooling down, and until when (ms since the epoch); unset when it did not look. */
  cooling?: Array<{ deployment: string; until: number }>;
}

/** One upstream attempt as a tracer is told of it when it starts. */
export interface AttemptStart {
  /** The provider method called: the format of the request and of its answer. */
  endpoint: ProviderEndpoint;
  provider: Provider;
  /** The catalog id the client asked for. */
  model: string;
  /** The body sent upstream (`model` the upstream's name). */
  body: JsonObject;
  stream: boolean;
}

/**
 * The trace of one upstream attempt, told by `UpstreamCall` what happens to it. Its methods cost
 * nothing measurable when the attempt is not sampled.
 */
export interface AttemptTrace {
  /** The W3C trace context (`traceparent`, `tracestate`) to send upstream; empty when there is none. */
  readonly headers: Readonly<Record<string, string>>;
  /** The upstream's status and headers arrived. */
  answered(answer: ProviderAnswer): void;
  /** A chunk of the upstream's answer body. */
  chunk(chunk: Buffer | string): void;
  /** The attempt failed: `errorType` is a low-cardinality class (`timeout`, a status code, an error code). Only the first counts. */
  failed(errorType: string): void;
  /** The upstream's part is over: called once. */
  end(): void;
}

/**
 * What `traceRequests()` (`koa-model-gateway/tracing`) puts on `ctx.state.tracing`: the request's
 * trace id and a way to trace each upstream attempt of it. Without it nothing is traced.
 */
export interface RequestTracing {
  /** The W3C trace id (32 hex digits) of the request's span; '' when there is none. */
  readonly traceId: string;
  attempt(start: AttemptStart): AttemptTrace;
  /** An `execute_tool` span for one MCP `tools/call` (`mcpGateway()`), a child of the request's span. */
  tool?(start: ToolCallStart): ToolCallTrace;
}

/** One MCP `tools/call` as a tracer is told of it when it starts. */
export interface ToolCallStart {
  /** The upstream server's id. */
  server: string;
  /** The tool's name on its server. */
  tool: string;
  /** The JSON-RPC id of the call. */
  callId: string;
}

/** The trace of one MCP `tools/call`. */
export interface ToolCallTrace {
  /** The W3C trace context (`traceparent`, `tracestate`) of the call's span, to send upstream; empty when there is none. */
  readonly headers: Readonly<Record<string, string>>;
  /** The call is over: `errorType` set when it failed (`timeout`, `denied`, …). */
  end(errorType?: string): void;
}
