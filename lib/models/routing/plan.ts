import type { Context } from 'koa';
import type { JsonObject } from '../content.js';
import type { Leg, ModelRoute } from './deployments.js';
import { weightedOrder, type Routing } from './routing-options.js';

/** What a plan is made from: every model's route, the routing options and the clock. */
export interface Planner {
  routes: ReadonlyMap<string, ModelRoute>;
  routing: Routing;
  nowMs: () => number;
}

/** The deployments a call may take and, for more than one, their cooldowns being read: `plan`'s first step. */
export interface Candidates {
  all: Leg[];
  until?: Promise<{ until: Array<number | null> } | { failed: unknown }>;
}

/**
 * `plan`'s first step, begun before the call's admission so that a shared store reads the
 * cooldowns in the same round trip (RedisCooldownStore batches with the limiters). A one-deployment
 * model without fallbacks asks the store nothing.
 */
export function candidates(named: ModelRoute, body: JsonObject, headers: Readonly<Record<string, string>>, { routes, routing, nowMs }: Planner): Candidates {
  const fallbacks = named.model.fallbacks.flatMap((id) => routes.get(id)?.legs.filter((leg) => carries(leg, body, headers)) ?? []);
  const all = [...named.legs, ...fallbacks];
  if (all.length === 1) return { all };
  // Settled here: a call refused at admission never awaits it.
  const until = (async () =>
    routing.store.coolingUntil(
      all.map((leg) => leg.key),
      nowMs(),
    ))().then(
    (read) => ({ until: read }),
    (failed: unknown) => ({ failed }),
  );
  return { all, until };
}

/**
 * The deployments a call tries, in order, of its `candidates`: the named model's healthy ones in a
 * weighted random order, then each fallback's that can carry the request; when every one is
 * cooling down, the one that comes back first.
 */
export async function plan(ctx: Context, named: ModelRoute, { all, until: reading }: Candidates, { routing }: Pick<Planner, 'routing'>): Promise<Leg[]> {
  if (reading === undefined) return all;
  const read = await reading;
  let until: Array<number | null>;
  if ('failed' in read) {
    // What cannot be read is no reason to refuse the call: route as if nothing cooled down.
    ctx.app.emit('error', read.failed, ctx);
    until = all.map(() => null);
  } else {
    until = read.until;
  }
  const fallbacks = all.slice(named.legs.length);
  const coolingUntil = new Map(all.map((leg, index) => [leg, until[index] ?? null]));
  const cooling = all.filter((leg) => coolingUntil.get(leg) !== null);
  if (ctx.state.modelRequest) ctx.state.modelRequest.cooling = cooling.map((leg) => ({ deployment: leg.key, until: coolingUntil.get(leg) as number }));
  const healthy = (legs: Leg[]) =>
    weightedOrder(
      legs.filter((leg) => coolingUntil.get(leg) === null),
      routing.random,
    );
  const models = [named.legs, ...named.model.fallbacks.map((id) => fallbacks.filter((leg) => leg.route.model.id === id))];
  const order = models.flatMap(healthy);
  if (order.length > 0) return order;
  return [cooling.reduce((first, leg) => ((coolingUntil.get(leg) as number) < (coolingUntil.get(first) as number) ? leg : first))];
}

/** Whether `leg` can carry `body` (a fallback in another format may not: it is passed over). */
function carries(leg: Leg, body: JsonObject, headers: Readonly<Record<string, string>>): boolean {
  try {
    leg.translation?.check(body, headers);
    return true;
  } catch {
    return false;
  }
}

/** The deployment of attempt `position`: the plan's in turn, from the start again when it is used up, past those cooling down. */
export function nextLeg(sequence: readonly Leg[], position: number, cooled: ReadonlySet<Leg>): Leg {
  for (let offset = 0; offset < sequence.length; offset++) {
    const leg = sequence[(position + offset) % sequence.length] as Leg;
    if (!cooled.has(leg)) return leg;
  }
  return sequence[position % sequence.length] as Leg;
}
