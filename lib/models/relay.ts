import type { Readable } from 'node:stream';
import type { Context } from 'koa';
import { errors, type GatewayError } from '../errors/gateway-error.js';
import { newRequestId } from '../errors/request-id.js';
import { EventSplitter } from '../http/server-sent-events.js';
import type { TokenUsage } from '../usage/token-usage.js';
import { isObject, type JsonObject } from './content.js';
import type { StreamedAnswer } from './answer.js';
import type { EndpointFormat } from './endpoint-format.js';
import { estimateCallInputTokens, estimateOutputTokens } from './formats/translate.js';
import type { ProviderAnswer } from './provider.js';
import { answerHeader, discard, providerAnswer, type UpstreamCall } from './upstream-call.js';

/**
 * The error for an upstream's 404. One with an API error in its body (an unknown upstream model)
 * is the gateway's configuration: 502, as other unexpected statuses. One without (a server that
 * has no such path: vLLM's `{"detail":"Not Found"}`, a plain-text page) would fail as often as
 * it is retried: a 404 naming the path, which no SDK retries.
 */
async function missingPath(call: UpstreamCall, answer: ProviderAnswer, { provider, path }: Forwarding): Promise<GatewayError> {
  const text = await call.text(answer.body);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    // A page of text: no API answered.
  }
  if (isObject(body) && isObject(body.error)) return call.malformed('answered HTTP 404');
  return errors.upstreamPathNotFound(provider, path);
}

const EVENT_STREAM = /^text\/event-stream\b/i;

/** One call as `forward()` sees it. */
export interface Forwarding {
  format: EndpointFormat;
  call: UpstreamCall;
  stream: boolean;
  /** The client's own body: what it asked for. */
  request: JsonObject;
  /** The catalog id the client asked for, which the answer names. */
  model: string;
  /** The provider's id and the path of its format's API, for the error of an upstream without it. */
  provider: string;
  path: string;
  /** Told the answer's usage when the upstream's answer has ended, before the client's has. */
  ended: (usage: TokenUsage) => void;
  /** The upstream's answer, once its status and headers arrived. */
  answer?: ProviderAnswer;
  /** What the attempt failed of, as it was thrown. */
  thrown?: unknown;
  /** True once a byte of the answer reached the client: nothing may be retried after. */
  delivered: boolean;
  /** Told what the client is sent, for the response cache to keep; unset when nothing keeps it. */
  tap?: AnswerTap;
}

/**
 * What the client of a call is sent, as `forward()` tells it: a JSON answer whole, or a stream's
 * events as they pass and, once the whole stream was sent, its end (a stream cut, failed or left
 * has none).
 */
export interface AnswerTap {
  json(body: string): void;
  events(text: string): void;
  end(): void;
}

/** Sends the request upstream and answers the client with the result, streamed or whole. */
export async function forward(ctx: Context, forwarding: Forwarding, send: () => Promise<ProviderAnswer | Response>): Promise<void> {
  const { format, call, stream, model } = forwarding;
  const onClose = () => {
    if (!ctx.res.writableFinished) call.abandon();
  };
  ctx.res.once('close', onClose);
  try {
    const answer = providerAnswer(await send());
    forwarding.answer = answer;
    call.answered(answer);
    if (answer.statusCode === 404) throw await missingPath(call, answer, forwarding);
    if (answer.statusCode < 200 || answer.statusCode > 299) throw await call.refusal(answer);
    if (!stream) {
      const json = await call.json(answer);
      forwarding.ended(format.answer.json(json, model));
      // Written here with its type, as Koa would write it: Koa would look the type up and set it again.
      ctx.res.setHeader('content-type', 'application/json; charset=utf-8');
      const text = JSON.stringify(json);
      ctx.body = text;
      forwarding.tap?.json(text);
      return;
    }
    if (!EVENT_STREAM.test(answerHeader(answer, 'content-type'))) {
      discard(answer.body);
      throw call.malformed('answered a streaming request without an event stream');
    }
    await relayEvents(ctx, forwarding, answer.body);
  } catch (thrown) {
    // Nobody is left to answer: end quietly, with nginx's "client closed request" for the log.
    if (call.clientGone) {
      ctx.status = 499;
      return;
    }
    forwarding.thrown = thrown;
    throw call.failure(thrown);
  } finally {
    call.end();
    ctx.res.off('close', onClose);
  }
}

/**
 * The usage of a stream cut short, by the client leaving or the upstream failing after its first
 * event: the upstream never tells the rest, and a call cut before its end must not be free. The
 * input is the upstream's count when it told one (Messages does at the start), else estimated
 * from the request; the output is the larger of what it told and an estimate from the text and
 * arguments relayed.
 */
function relayedUsage(reader: StreamedAnswer, { format, request }: Forwarding): TokenUsage {
  const { usage } = reader;
  return {
    ...usage,
    inputTokens: usage.inputTokens > 0 ? usage.inputTokens : estimateCallInputTokens(format.endpoint, request),
    outputTokens: Math.max(usage.outputTokens, estimateOutputTokens(reader.outputChars ?? 0)),
  };
}

/**
 * Passes the upstream's events to the client as they arrive, each through the format's reader
 * (the catalog id in place of the upstream's model, usage read and, where the client did not ask
 * for it, withheld): one write per chunk of the upstream's, of the events it completes. From here
 * on the status and headers are sent, so this writes the response itself (no buffering, no
 * compression by Koa) and tells a failure as an error event of the endpoint's format, reporting
 * it on `app.on('error')` as the formatters do, the call then charged for what was relayed. Until
 * its first event, nothing is sent: a failure then is thrown, as one before the answer, and may be
 * retried.
 */
async function relayEvents(ctx: Context, forwarding: Forwarding, body: Readable): Promise<void> {
  const { format, call } = forwarding;
  const reader = format.answer.stream(forwarding.request, forwarding.model);
  const splitter = new EventSplitter({ maxEventBytes: call.maxBytes });
  const { res } = ctx;
  // The status and headers go with the first event: a stream that fails before it can still be retried.
  const start = () => {
    if (forwarding.delivered) return;
    forwarding.delivered = true;
    call.delivered();
    ctx.status = 200;
    ctx.set({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    ctx.respond = false;
    res.flushHeaders();
  };
  // False when the client reads slowly: the upstream's body waits for it. The events before an
  // upstream's error event go out first; the error is thrown after them.
  const pass = (events: string[]) => {
    let out = '';
    let failure: unknown;
    try {
      for (const event of events) out += reader.event(event);
    } catch (err) {
      failure = err;
    }
    let more = true;
    if (out !== '') {
      forwarding.tap?.events(out);
      start();
      more = res.write(out);
    }
    if (failure !== undefined) throw failure;
    return more;
  };
  try {
    await call.read(body, (chunk) => pass(splitter.push(chunk)), res);
    pass(splitter.end());
    // Ended without its format's last event ([DONE], message_stop, ...): cut off, not a whole answer.
    if (reader.finished === false) throw call.malformed('ended its stream before its last event');
    start();
    forwarding.tap?.end();
  } catch (thrown) {
    if (!forwarding.delivered) throw thrown;
    forwarding.ended(relayedUsage(reader, forwarding));
    if (call.clientGone) return;
    const err = call.failure(thrown);
    ctx.app.emit('error', err, ctx);
    res.end(format.errorEvent(err, ctx.state.requestId ?? newRequestId()));
    return;
  }
  forwarding.ended(reader.usage);
  res.end();
}
