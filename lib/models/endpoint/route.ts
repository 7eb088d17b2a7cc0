import type { Context } from 'koa';
import { errors } from '../../errors/gateway-error.js';
import { readAttachments } from '../attachments.js';
import type { CacheTicket } from '../cache/response-caching.js';
import { AttemptFailedError } from '../routing/attempt-failed.js';
import type { Leg } from '../routing/deployments.js';
import { learn, type Failure } from '../routing/failures.js';
import { candidates, nextLeg, plan, type Candidates } from '../routing/plan.js';
import { backoffMs } from '../routing/routing-options.js';
import { attempt } from './attempt.js';
import type { AdmittedCall, EndpointSetup } from './call.js';

/**
 * Sends the call to its deployments in the planned order until one answers: each attempt after a
 * backoff, within the routing's attempts and time budget, a deployment that begins to cool down
 * passed over while another is left. The last failure is the call's, with the attempt count and
 * the deployment on its headers. An answered call's entry is stored in the cache.
 */
export async function route(
  ctx: Context,
  setup: EndpointSetup,
  call: AdmittedCall,
  reachable: Candidates | undefined,
  cached: CacheTicket | undefined,
): Promise<void> {
  const { format, planner, stores, nowMs, timeoutMs } = setup;
  const { routing } = planner;
  const { body, route: named, files, headers, state } = call;
  // The bytes only now: a refused call reads none.
  const attached = files.length === 0 ? undefined : await readAttachments(stores, files);
  const withFiles = attached
    ? format.fileReferences.map(body, (fileId, block) => {
        const file = attached.get(fileId as string);
        return file ? format.fileReferences.inline(block, file) : block;
      })
    : body;

  const sequence = named.alone ?? (await plan(ctx, named, reachable ?? candidates(named, body, headers, planner), planner));
  const startedAt = nowMs();
  // Deployments that began to cool down during this call: passed over while another is left.
  const cooled = new Set<Leg>();
  let failure: Failure | undefined;
  let previous: Leg | undefined;
  let number = 0;
  for (let position = 0; number < routing.maxAttempts; position++) {
    const leg = nextLeg(sequence, position, cooled);
    if (number > 0) {
      const wait = backoffMs(routing, number, leg === previous ? failure?.retryAfterMs : undefined);
      if (routing.budgetMs !== undefined && nowMs() - startedAt + wait >= routing.budgetMs) break;
      await routing.sleep(wait);
    }
    // What is left of the budget bounds the whole answer, however many bytes trickle in; without one, timeoutMs does.
    const answerMs = routing.budgetMs === undefined ? timeoutMs : routing.budgetMs - (nowMs() - startedAt);
    const silenceMs = Math.min(timeoutMs, answerMs);
    if (silenceMs <= 0) break;
    number++;
    failure = await attempt(ctx, setup, call, withFiles, cached, leg, { number, silenceMs, answerMs });
    if (failure === undefined) {
      cached?.store();
      return;
    }
    previous = leg;
    if (!failure.retryable) break;
    const coolsDown = await learn(ctx, leg, failure, routing, nowMs);
    if (coolsDown) cooled.add(leg);
    if (number < routing.maxAttempts)
      ctx.app.emit(
        'error',
        new AttemptFailedError(leg.provider.id, leg.upstreamModel, number, failure.outcome, { cause: failure.error.cause ?? failure.error }),
        ctx,
      );
  }
  const err = failure?.error ?? errors.upstreamTimeout();
  Object.assign(err.headers, { 'x-kmg-attempts': String(number), 'x-kmg-deployment': state.provider });
  throw err;
}
