const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/** A clock minute or a UTC day: its id names its counters. */
export interface ClockWindow {
  id: string;
  /** Unix ms at which the window ends and the next one starts. */
  endsAt: number;
}

export interface ClockWindows {
  /** The clock minute: its index since the epoch names its counter. */
  minute: ClockWindow;
  /** The UTC day: its date (`2025-01-31`) names its counters. */
  day: ClockWindow;
}

/**
 * The minute and day that `now` falls in. Counters are named after their window rather than
 * expiring from their first use, so a late release finds exactly the window it spent in (or
 * nothing), never the next one. Unix time has no leap seconds: every UTC day is 86,400,000 ms.
 */
export function clockWindows(now: number): ClockWindows {
  const minute = Math.floor(now / MINUTE_MS);
  const day = Math.floor(now / DAY_MS);
  return {
    minute: { id: String(minute), endsAt: (minute + 1) * MINUTE_MS },
    day: { id: utcDate(now), endsAt: (day + 1) * DAY_MS },
  };
}

// The date of the last day asked for: every call of a day asks for the same one.
let lastDay = Number.NaN;
let lastDate = '';

/**
 * The UTC date (`2025-01-31`) of a time in Unix ms, made once per day however often it is asked.
 * @example utcDate(Date.parse('2025-01-31T23:59:59Z')) // '2025-01-31'
 */
export function utcDate(ms: number): string {
  const day = Math.floor(ms / DAY_MS);
  if (day !== lastDay) {
    lastDate = new Date(day * DAY_MS).toISOString().slice(0, 10);
    lastDay = day;
  }
  return lastDate;
}

/** Whole seconds from `now` to `endsAt`, rounded up so that a client waiting that long is allowed; at least 1. */
export function secondsUntil(endsAt: number, now: number): number {
  return Math.max(1, Math.ceil((endsAt - now) / 1000));
}
