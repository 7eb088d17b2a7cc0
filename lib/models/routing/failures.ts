import type { Context } from 'koa';
import { GatewayError } from '../../errors/gateway-error.js';
import type { Forwarding } from '../relay.js';
import { answerHeader } from '../upstream-call.js';
import type { Leg } from './deployments.js';
import { retryAfterMs as retryAfter, type Routing } from './routing-options.js';

/** A failed attempt: what the client would be told, and whether another attempt may follow. */
export interface Failure {
  error: GatewayError;
  retryable: boolean;
  /** The upstream's status, when it answered one. */
  status: number | undefined;
  retryAfterMs: number | undefined;
  /** For the metric and the log: `ok`, a status, `timeout`, or an error code. */
  outcome: string;
}

/**
 * Whether a failed attempt is retried (decisions.md): never once the client has a byte of the
 * answer; a connection error or a timeout before the upstream's first byte, or one of the retried
 * statuses; a 2xx answer that failed before any of it reached the client: a JSON answer cut,
 * unreadable, too large or too slow, a stream before its first event.
 */
export function classify(routing: Routing, forwarding: Forwarding, error: GatewayError): Failure {
  const { answer, thrown, call } = forwarding;
  const status = answer?.statusCode;
  const retryAfterMs = answer && retryAfter({ get: (name) => answerHeader(answer, name) }, Date.now());
  const failedStatus = status !== undefined && (status < 200 || status > 299);
  const outcome = failedStatus ? String(status) : call.timedOut ? 'timeout' : errorClass(thrown);
  let retryable: boolean;
  if (forwarding.delivered) retryable = false;
  else if (status === undefined) retryable = !(thrown instanceof GatewayError) || routing.retryStatuses.has(thrown.status);
  else retryable = !failedStatus || routing.retryStatuses.has(status);
  return { error, retryable, status, retryAfterMs, outcome };
}

function errorClass(thrown: unknown): string {
  if (thrown instanceof GatewayError) return String(thrown.status);
  const { code } = (thrown ?? {}) as { code?: unknown };
  return typeof code === 'string' ? code : 'error';
}

/** Tells the cooldown store of a failure; true when the deployment now cools down. */
export async function learn(ctx: Context, leg: Leg, failure: Failure, routing: Routing, nowMs: () => number): Promise<boolean> {
  const retryAfter = failure.status === 429 ? failure.retryAfterMs : undefined;
  try {
    const until = await routing.store.fail(leg.key, routing.policy, nowMs(), retryAfter);
    if (until === null) return false;
    ctx.state.modelRequest?.cooldowns.push(leg.provider.id);
    return true;
  } catch (err) {
    ctx.app.emit('error', err, ctx);
    return false;
  }
}
