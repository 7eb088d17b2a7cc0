import { utcDate } from '../quota/clock-windows.js';
import type { UsageRow } from './usage-store.js';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** The start of the UTC hour of `time` (Unix ms): the period of an hourly roll-up. */
export const usageHour = (time: number): number => time - (((time % HOUR_MS) + HOUR_MS) % HOUR_MS);

/**
 * Where a summary since `since` (Unix ms, whole) reads its figures, so that it reads as few rows
 * as it can and still counts each record once: the raw records up to the first whole hour, the
 * hourly roll-ups up to the first whole UTC day, the daily roll-ups after. Without `since`, the
 * daily roll-ups alone. Each span is `[since, until)`; a span left out reads nothing.
 */
export interface UsageSpans {
  raw?: { since: number; until: number };
  hourly?: { since: number; until: number };
  /** The first UTC day (`2030-01-31`) the daily roll-ups are read from; left out: every day. */
  daily: { sinceDay?: string };
}

export function usageSpans(since: number | undefined): UsageSpans {
  if (since === undefined) return { daily: {} };
  const hour = Math.ceil(since / HOUR_MS) * HOUR_MS;
  const day = Math.ceil(since / DAY_MS) * DAY_MS;
  return {
    ...(since < hour && { raw: { since, until: hour } }),
    ...(hour < day && { hourly: { since: hour, until: day } }),
    daily: { sinceDay: utcDate(day) },
  };
}

/** The rows summed from each span as one row per (group, subgroup). */
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
  return [...merged.values()];
}
