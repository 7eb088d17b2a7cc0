import type { Context } from 'koa';
import { callCost } from '../../cost/price.js';
import type { GatewayError } from '../../errors/gateway-error.js';
import type { TokenUsage } from '../../usage/token-usage.js';
import type { CacheTicket } from '../cache/response-caching.js';
import type { JsonObject } from '../content.js';
import { FORMATS } from '../formats/registry.js';
import { OMITTED_HEADER } from '../formats/translate.js';
import type { ProviderRequest } from '../provider.js';
import { forward, type Forwarding } from '../relay.js';
import type { Leg } from '../routing/deployments.js';
import { classify, type Failure } from '../routing/failures.js';
import { UpstreamCall } from '../upstream-call.js';
import type { AdmittedCall, EndpointSetup } from './call.js';

/** One attempt's bounds: its number, how long the upstream may stay silent, and by when it must have answered. */
export interface AttemptBounds {
  number: number;
  silenceMs: number;
  answerMs: number;
}

/**
 * One attempt on one deployment: undefined when it answered (or the client left), else its error
 * and whether another attempt may follow. Its figures land on `state`: the last attempt's are the
 * call's. The upstream may stay silent `silenceMs`, and must have given its whole JSON answer, or
 * a stream's first event, within `answerMs`.
 */
export async function attempt(
  ctx: Context,
  { format, planner, maxUpstreamBytes }: EndpointSetup,
  { body, model, headers, stream, state }: AdmittedCall,
  withFiles: JsonObject,
  cached: CacheTicket | undefined,
  leg: Leg,
  { number, silenceMs, answerMs }: AttemptBounds,
): Promise<Failure | undefined> {
  const { translation: translated, send } = leg;
  state.provider = leg.provider.id;
  state.upstreamModel = leg.upstreamModel;
  if (translated === undefined) delete state.translatedTo;
  else state.translatedTo = translated.target;
  ctx.res.setHeader('x-kmg-attempts', String(number));
  ctx.res.setHeader('x-kmg-deployment', leg.provider.id);
  ctx.res.removeHeader(OMITTED_HEADER);
  delete state.omitted;
  const inlined = { ...withFiles, model: leg.upstreamModel };
  const upstreamBody = stream && format.answer.streamRequest ? format.answer.streamRequest(inlined) : inlined;
  const trace = ctx.state.tracing?.attempt({ endpoint: format.endpoint, provider: leg.provider, model, body: upstreamBody, stream });
  const call = new UpstreamCall(leg.provider.id, silenceMs, trace, { maxBytes: maxUpstreamBytes, answerMs });
  let usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  // What a translated stream told in the provider's format, which the client's may tell only at its end.
  let translatedUsage: TokenUsage | undefined;
  const sendCall = translated
    ? async (request: ProviderRequest) => {
        const answer = await translated.send(request);
        translatedUsage = answer.usage;
        if (answer.omitted.length > 0) {
          ctx.res.setHeader(OMITTED_HEADER, answer.omitted.join(','));
          state.omitted = [...answer.omitted];
        }
        return answer;
      }
    : send;
  // When the upstream's answer has ended: before the client's answer does, so that whatever
  // observes the end of the response finds the figures.
  const ended = (answered: TokenUsage) => {
    usage = translatedUsage
      ? {
          ...translatedUsage,
          ...answered,
          // The provider's count when it told one: the client's format may hold an estimate (a stream cut short).
          inputTokens: translatedUsage.inputTokens > 0 ? translatedUsage.inputTokens : answered.inputTokens,
          outputTokens: Math.max(answered.outputTokens, translatedUsage.outputTokens),
        }
      : answered;
    call.end();
    Object.assign(state, usage);
    state.upstreamFirstByteMs = call.firstByteMs;
    state.upstreamMs = call.durationMs;
    state.costPicoUsd = callCost(leg.route.price, usage);
  };
  // Set once the relay tells the answer's usage: an answer given whole, or a stream cut after its first event.
  let answered = false;
  const told = (usage: TokenUsage) => {
    answered = true;
    ended(usage);
  };
  // A neutral provider's errors carry an API error in their body: no path is ever named for them.
  const target = translated?.target ?? format.endpoint;
  const path = target === 'neutral' ? '' : FORMATS[target].path;
  const forwarding: Forwarding = { format, call, stream, request: body, model, provider: leg.provider.id, path, ended: told, delivered: false };
  if (cached?.collector) forwarding.tap = cached.collector;
  const tried = { provider: leg.provider.id, model: leg.route.model.id, upstreamModel: leg.upstreamModel };
  try {
    await forward(ctx, forwarding, () => sendCall(call.request(upstreamBody, headers)));
    state.attempts.push({ ...tried, outcome: 'ok' });
    return undefined;
  } catch (thrown) {
    const failure = classify(planner.routing, forwarding, thrown as GatewayError);
    state.attempts.push({ ...tried, outcome: failure.retryable ? 'failed' : 'refused' });
    return failure;
  } finally {
    // Nothing reached the client (a failure, or a client gone, before the answer): nothing is
    // charged, whatever a translated stream told before it failed.
    if (!answered) translatedUsage = undefined;
    ended(usage);
  }
}
