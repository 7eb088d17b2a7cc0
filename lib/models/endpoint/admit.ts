import type { Context } from 'koa';
import { verifiedKey } from '../../auth/api-key.js';
import { modelAccess } from '../../auth/model-access.js';
import { errors, type GatewayError } from '../../errors/gateway-error.js';
import { isFileId } from '../../files/file-id.js';
import { readJsonBody } from '../../http/json-body.js';
import type { ModelRequestState } from '../../state.js';
import { findAttachments } from '../attachments.js';
import type { AdmittedCall, EndpointSetup } from './call.js';

/**
 * The first step of a model call: read the body, resolve the model through the one allowlist
 * policy, check the body and the files it attaches, and put the call on `ctx.state.modelRequest`.
 * Check order as decisions.md fixes it: permission (403), validation (400/413), existence (404);
 * a refused call sends nothing upstream and counts nothing.
 */
export async function admit(ctx: Context, setup: EndpointSetup): Promise<AdmittedCall> {
  const { format, catalogIds, planner, servedType, nowMs } = setup;
  const key = verifiedKey(ctx);
  const body = await readJsonBody(ctx.req, setup.bodyLimit);
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

  format.checkBody(body);

  const route = access === 'allowed' ? planner.routes.get(requested) : undefined;
  if (route === undefined) throw format.modelNotFound(requested);
  if (route.model.type !== servedType) throw wrongModelType(requested, route.model.type);
  const first = route.legs[0];
  if (first === undefined) throw format.unsupported(requested);
  const headers = forwardedHeaders(ctx, format.forwardHeaders);
  const stream = body.stream === true;
  const state: ModelRequestState = {
    model: requested,
    provider: first.provider.id,
    upstreamModel: first.upstreamModel,
    stream,
    attachments: checkedIds.length,
    inputTokens: 0,
    outputTokens: 0,
    upstreamFirstByteMs: null,
    upstreamMs: null,
    costPicoUsd: 0,
    attempts: [],
    cooldowns: [],
    ...(first.translation && { translatedTo: first.translation.target }),
  };
  ctx.state.modelRequest = state;
  // What cannot be carried over is refused here, a validation error like any other, recorded
  // with the model it was refused for.
  for (const leg of route.legs) leg.translation?.check(body, headers);
  const files = checkedIds.length === 0 ? [] : await findAttachments(setup.stores, key.account, checkedIds, Math.floor(nowMs() / 1000), setup.maxAttachedBytes);
  return { key, body, model: requested, route, headers, stream, state, files, limits: { ...setup.modelLimits, ...key.limits } };
}

/** A model of the catalog that this endpoint does not serve: a 400 naming it and where it is served. */
function wrongModelType(model: string, type: 'chat' | 'embeddings'): GatewayError {
  return type === 'embeddings'
    ? errors.invalidRequest(`The model '${model}' is an embeddings model: it is served on /v1/embeddings only`)
    : errors.invalidRequest(`The model '${model}' is not an embeddings model: it is served on the chat endpoints, not /v1/embeddings`);
}

/** The client's headers meant for the upstream (`names`, lower-case), those it sent. */
function forwardedHeaders(ctx: Context, names: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of names) {
    const value = ctx.get(name);
    if (value !== '') headers[name] = value;
  }
  return headers;
}
