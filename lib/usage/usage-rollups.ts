import { utcDate } from '../quota/clock-windows.js';
import type { UsageRow } from './usage-store.js';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** The start of the UTC hour of `time` (Unix ms): the period of an hourly roll-up. */
export const usageHour = (time: number): number => time - (((time % HOUR_MS) + HOUR_MS) % HOUR_MS);

/**
 * Where a summary since `since` (Unix ms, whole) reads its figures, so that it reads as few rows
 * as it can and still counts each record once: the raw records up to the first whole hour, then
 * the rest of that UTC day from the hourly roll-ups, and the daily roll-ups after. When the day's
 * hours before are fewer than those after, that day is read whole from the daily roll-ups and its
 * hours before the first whole hour subtracted: at most 12 hours of hourly rows either way. Without
 * `since`, the daily roll-ups alone. Each span is `[since, until)`; a span left out reads nothing.
 */
export interface UsageSpans {
  raw?: { since: number; until: number };
  /** `subtract`: the hours to take away from the first day, read whole, rather than to add. */
  hourly?: { since: number; until: number; subtract?: true };
  /** The first UTC day (`2030-01-31`) the daily roll-ups are read from; left out: every day. */
  daily: { sinceDay?: string };
}

export function usageSpans(since: number | undefined): UsageSpans {
  if (since === undefined) return { daily: {} };
  const hour = Math.ceil(since / HOUR_MS) * HOUR_MS;
  const day = Math.ceil(since / DAY_MS) * DAY_MS;
  const raw = since < hour ? { raw: { since, until: hour } } : {};
  if (hour === day) return { ...raw, daily: { sinceDay: utcDate(day) } };
  const dayBefore = day - DAY_MS;
  if (hour - dayBefore < day - hour) return { ...raw, hourly: { since: dayBefore, until: hour, subtract: true }, daily: { sinceDay: utcDate(dayBefore) } };
  return { ...raw, hourly: { since: hour, until: day }, daily: { sinceDay: utcDate(day) } };
}

/** `rows` with every figure negated: what a span read to be subtracted adds. */
export function negatedUsageRows(rows: readonly UsageRow[]): UsageRow[] {
  return rows.map((row) => ({
    ...row,
    requests: -row.requests,
    answered: -row.answered,
    inputTokens: -row.inputTokens,
    outputTokens: -row.outputTokens,
    costPicoUsd: -row.costPicoUsd,
    cacheHits: -row.cacheHits,
    costSavedPicoUsd: -row.costSavedPicoUsd,
  }));
}

/** The rows summed from each span as one row per (group, subgroup); a group a subtracted span emptied is left out. */
export function mergeUsageRows(parts: readonly UsageRow[][]): UsageRow[] {
  const merged = new Map<string, UsageRow>();
  for (const row of parts.flat()) {
    const id = JSON.stringify([row.group, row.subgroup]);
    const into = merged.get(id);
    if (into === undefined) {
      merged.set(id, { ...row });
      continue;
    }
    into.requests += row.requests;
    into.answered += row.answered;
    into.inputTokens += row.inputTokens;
    into.outputTokens += row.outputTokens;
    into.costPicoUsd += row.costPicoUsd;
    into.cacheHits += row.cacheHits;
    into.costSavedPicoUsd += row.costSavedPicoUsd;
  }
  return [...merged.values()].filter((row) => row.requests !== 0);
}
