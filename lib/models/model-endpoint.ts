import { once } from 'node:events';
import type { Context } from 'koa';
import { z } from 'zod';
import { verifiedKey } from '../auth/api-key.js';
import { modelAccess } from '../auth/model-access.js';
import { errors, type GatewayError } from '../errors/gateway-error.js';
import { newRequestId } from '../errors/request-id.js';
import type { BlobStore } from '../files/blob-store.js';
import { isFileId } from '../files/file-id.js';
import type { FileStore } from '../files/file-store.js';
import { parseOptions, positiveInteger } from '../settings/schemas.js';
import { loadAttachments, type FileReferences, type FileStores } from './attachments.js';
import { endpointCatalogOptions, type CatalogModel, type ResolvedModel } from './catalog.js';
import { readJsonBody } from './json-body.js';
import type { Provider, ProviderEndpoint } from './provider.js';
import { wholeEvents } from './server-sent-events.js';
import { UpstreamCall } from './upstream-call.js';

/** Options of `chatCompletions()`, `responses()`, `messages()` and `countTokens()`. */
export interface ModelEndpointOptions {
  /** The models clients may ask for. */
  catalog: readonly CatalogModel[];
  /**
   * The providers the models refer to by id: the built-in `openAIProvider()`, `anthropicProvider()`,
   * `echoProvider()`, or any object of the `Provider` interface.
   */
  providers: readonly Provider[];
  /** Where attached files are looked up. Without `files` and `blobs`, every file reference is 404. */
  files?: FileStore;
  blobs?: BlobStore;
  /** How long the upstream may stay silent, before its headers or between two reads of its body. Default 300,000 ms. */
  timeoutMs?: number;
  /** Largest request body, in bytes. Default 10 MiB (10,485,760). */
  bodyLimit?: number;
  /** Largest total of the files attached to one request, in bytes. Default 32 MiB (33,554,432), both providers' request limit. */
  maxAttachedBytes?: number;
  /** The clock for file expiry, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

/** What a model handler puts on `ctx.state.modelRequest`, for the request log. */
export interface ModelRequestState {
  /** The catalog id the client asked for. */
  model: string;
  provider: string;
  upstreamModel: string;
  stream: boolean;
  /** How many stored files were attached. */
  attachments: number;
}

declare module 'koa' {
  interface DefaultState {
    /** Set by `chatCompletions()` / `messages()` once the model is resolved. */
    modelRequest?: ModelRequestState;
  }
}

/** What differs between the endpoints. */
export interface EndpointFormat {
  endpoint: ProviderEndpoint;
  /**
   * The answer for a model outside the key's allowlist, given before the request is validated
   * further. Left out (Messages), such a model gets `modelNotFound`, at the same point as an
   * unknown one, so that the two cannot be told apart.
   */
  modelNotAllowed?: (model: string) => GatewayError;
  modelNotFound: (model: string) => GatewayError;
  /** The model's provider does not speak this endpoint's format. */
  unsupported: (model: string) => GatewayError;
  fileReferences: FileReferences;
  /** Client headers passed to the provider, lower-case. */
  forwardHeaders: readonly string[];
  /** A failure after the stream has started, as an event of this format. */
  errorEvent: (err: GatewayError, requestId: string) => string;
}

const endpointLimits = z.object({
  timeoutMs: positiveInteger.default(300_000),
  bodyLimit: positiveInteger.default(10 * 1024 * 1024),
  maxAttachedBytes: positiveInteger.default(32 * 1024 * 1024),
});

/**
 * The request handling every model endpoint shares, as a function of `ctx`: parse, resolve the model
 * through the one allowlist policy, resolve attached files, forward, answer. Check order as
 * decisions.md fixes it: permission (403), validation (400/413), existence (404).
 */
export function modelEndpoint(format: EndpointFormat, options: ModelEndpointOptions): (ctx: Context) => Promise<void> {
  const where = `${format.endpoint}()`;
  const { catalog, providers } = endpointCatalogOptions(options, where);
  const { timeoutMs, bodyLimit, maxAttachedBytes } = parseOptions(endpointLimits, options, where);
  if ((options.files === undefined) !== (options.blobs === undefined)) {
    throw new TypeError(`koa-model-gateway: ${where}: files and blobs go together: give both or neither`);
  }
  const stores: FileStores | undefined = options.files && options.blobs && { files: options.files, blobs: options.blobs };
  const nowMs = options.nowMs ?? Date.now;
  const byId = new Map(providers.map((provider) => [provider.id, provider]));
  const routes = new Map<string, { model: ResolvedModel; provider: Provider }>();
  for (const model of catalog) {
    const provider = byId.get(model.provider);
    if (provider) routes.set(model.id, { model, provider });
  }
  const catalogIds = new Set(routes.keys());

  return async (ctx) => {
    const key = verifiedKey(ctx);
    const body = await readJsonBody(ctx.req, bodyLimit);
    const requested = body.model;
    if (typeof requested !== 'string' || requested === '') throw errors.invalidRequest("'model' must be a non-empty string");
    const access = modelAccess(key, catalogIds, requested);
    if (access === 'not_allowed' && format.modelNotAllowed) throw format.modelNotAllowed(requested);

    const fileIds: unknown[] = [];
    format.fileReferences.map(body, (fileId, block) => {
      fileIds.push(fileId);
      return block;
    });
    // A key must not read through a model what it could not read directly.
    if (fileIds.length > 0 && !key.scopes.includes('files:read')) throw errors.forbidden();
    const checkedIds = fileIds.map((id) => {
      if (typeof id !== 'string' || !isFileId(id)) throw errors.invalidFileId();
      return id;
    });

    const route = access === 'allowed' ? routes.get(requested) : undefined;
    if (route === undefined) throw format.modelNotFound(requested);
    const send = route.provider[format.endpoint]?.bind(route.provider);
    if (send === undefined) throw format.unsupported(requested);

    const attached = await loadAttachments(stores, key.account, checkedIds, Math.floor(nowMs() / 1000), maxAttachedBytes);
    const upstreamBody = {
      ...format.fileReferences.map(body, (fileId, block) => {
        const file = attached.get(fileId as string);
        return file ? format.fileReferences.inline(block, file) : block;
      }),
      model: route.model.upstreamModel,
    };
    const stream = body.stream === true;
    ctx.state.modelRequest = {
      model: requested,
      provider: route.provider.id,
      upstreamModel: route.model.upstreamModel,
      stream,
      attachments: checkedIds.length,
    };
    const headers: Record<string, string> = {};
    for (const name of format.forwardHeaders) {
      const value = ctx.get(name);
      if (value !== '') headers[name] = value;
    }
    const call = new UpstreamCall(route.provider.id, timeoutMs);
    await forward(ctx, format, call, stream, () => send({ body: upstreamBody, headers, signal: call.signal }));
  };
}

/** Sends the request upstream and answers the client with the result, streamed or whole. */
async function forward(ctx: Context, format: EndpointFormat, call: UpstreamCall, stream: boolean, send: () => Promise<Response>): Promise<void> {
  const onClose = () => {
    if (!ctx.res.writableFinished) call.abandon();
  };
  ctx.res.once('close', onClose);
  try {
    const response = await send();
    call.touch();
    if (!response.ok) throw await call.refusal(response);
    if (!stream) {
      ctx.body = await call.json(response);
      return;
    }
    if (!/^text\/event-stream\b/i.test(response.headers.get('content-type') ?? '')) {
      await response.body?.cancel().catch(() => undefined);
      throw call.malformed('answered a streaming request without an event stream');
    }
    await streamEvents(ctx, format, call, response);
  } catch (thrown) {
    // Nobody is left to answer: end quietly, with nginx's "client closed request" for the log.
    if (call.clientGone) {
      ctx.status = 499;
      return;
    }
    throw call.failure(thrown);
  } finally {
    call.pause();
    ctx.res.off('close', onClose);
  }
}

/**
 * Passes the upstream's events to the client as they arrive. From here on the status and headers
 * are sent, so this writes the response itself (no buffering, no compression by Koa) and tells a
 * failure as an error event of the endpoint's format, reporting it on `app.on('error')` as the
 * formatters do.
 */
async function streamEvents(ctx: Context, format: EndpointFormat, call: UpstreamCall, response: Response): Promise<void> {
  ctx.status = 200;
  ctx.set({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
  ctx.respond = false;
  const { res } = ctx;
  res.flushHeaders();
  try {
    for await (const events of wholeEvents(call.chunks(response))) {
      if (res.write(events)) continue;
      // The client reads slowly: that is no silence of the upstream.
      call.pause();
      await once(res, 'drain', { signal: call.signal });
      call.touch();
    }
  } catch (thrown) {
    if (call.clientGone) return;
    const err = call.failure(thrown);
    ctx.app.emit('error', err, ctx);
    res.write(format.errorEvent(err, ctx.state.requestId ?? newRequestId()));
  }
  res.end();
}
