import type { DailyUsage, UsageGroup, UsageSplit } from './api.ts';

/** Stacks beyond this many are one "Other" stack: more colours than this cannot be told apart. */
const MAX_STACKS = 8;

const DAY_MS = 86_400_000;

/** A time as its UTC day, `2030-01-31`: the server counts days in UTC. */
export const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** The UTC days of the last `count` days, oldest first, today last. */
export function lastDays(count: number, nowMs = Date.now()): string[] {
  return Array.from({ length: count }, (_, i) => utcDay(nowMs - (count - 1 - i) * DAY_MS));
}

/** The name of the calls without a model: refused before one was chosen (a bad body, an unknown model, a limit). */
export const NO_MODEL = '(refused before a model was chosen)';

/** How a series entry is named: its model id or key id; calls refused before their model was known have none. */
export function seriesName(entry: UsageGroup, split: UsageSplit): string {
  const name = entry[split];
  return name === null || name === undefined ? NO_MODEL : name;
}

/** The requests of each of `days`, as two stacks: answered (2xx), then refused or failed (4xx, 5xx). */
export function outcomeStacks(usage: DailyUsage, days: string[]): Stack[] {
  const byDay = new Map(usage.data.map((row) => [row.day, row]));
  const stack = (name: string, figure: 'answered' | 'refused'): Stack => ({
    name,
    requests: days.map((day) => byDay.get(day)?.[figure] ?? 0),
    tokens: days.map(() => 0),
    cost: days.map(() => 0),
  });
  return [stack('Answered', 'answered'), stack('Refused or failed', 'refused')];
}

/** One stack of the charts: its name and a figure per day. */
export interface Stack {
  name: string;
  requests: number[];
  tokens: number[];
  /** USD. */
  cost: number[];
}

/**
 * The charts' stacks over `days`: one per model or key, the busiest (by tokens, then requests)
 * first, and those past the eighth added up as one "Other" stack. Days without calls are zeros.
 */
export function chartStacks(usage: DailyUsage, days: string[], split: UsageSplit): Stack[] {
  const column = new Map(days.map((day, index) => [day, index]));
  const stacks = new Map<string, Stack & { total: number; count: number }>();
  for (const row of usage.data) {
    const index = column.get(row.day);
    if (index === undefined) continue;
    for (const entry of row.series) {
      const name = seriesName(entry, split);
      let stack = stacks.get(name);
      if (stack === undefined) {
        stack = { name, requests: days.map(() => 0), tokens: days.map(() => 0), cost: days.map(() => 0), total: 0, count: 0 };
        stacks.set(name, stack);
      }
      const tokens = entry.input_tokens + entry.output_tokens;
      stack.requests[index] = (stack.requests[index] ?? 0) + entry.requests;
      stack.tokens[index] = (stack.tokens[index] ?? 0) + tokens;
      stack.cost[index] = (stack.cost[index] ?? 0) + entry.cost_usd;
      stack.total += tokens;
      stack.count += entry.requests;
    }
  }
  const ranked = [...stacks.values()].sort((a, b) => b.total - a.total || b.count - a.count || (a.name < b.name ? -1 : 1));
  if (ranked.length <= MAX_STACKS) return ranked.map(({ name, requests, tokens, cost }) => ({ name, requests, tokens, cost }));
  const shown = ranked.slice(0, MAX_STACKS - 1);
  const rest = ranked.slice(MAX_STACKS - 1);
  const other: Stack = {
    name: `Other (${rest.length})`,
    requests: days.map((_, i) => rest.reduce((sum, stack) => sum + (stack.requests[i] ?? 0), 0)),
    tokens: days.map((_, i) => rest.reduce((sum, stack) => sum + (stack.tokens[i] ?? 0), 0)),
    cost: days.map((_, i) => rest.reduce((sum, stack) => sum + (stack.cost[i] ?? 0), 0)),
  };
  return [...shown.map(({ name, requests, tokens, cost }) => ({ name, requests, tokens, cost })), other];
}

/**
 * A key's label in the charts: its name with its id where it has one (two keys may share a name),
 * else its id. Stacks of models, and "Other", keep theirs.
 */
export function keyLabel(id: string, names: ReadonlyMap<string, string>): string {
  const name = names.get(id);
  return name === undefined ? id : `${name} (${id})`;
}
