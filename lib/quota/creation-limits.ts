import { errors, type GatewayError } from '../errors/gateway-error.js';
import { secondsUntil, type ClockWindows } from './clock-windows.js';

/** The rate limits on file creation, per account. Defaults are api.md section 8. */
export interface CreationLimitsOptions {
  /** Creations per clock minute (UTC, :00 to :59). Default 10. */
  createsPerMinute?: number;
  /** Creations per UTC day (midnight to midnight). Default 1,000. */
  createsPerDay?: number;
  /** Bytes created per UTC day. Default 1,073,741,824 (1 GiB). */
  bytesPerDay?: number;
  /** The clock that places a creation in its minute and day, in milliseconds since the Unix epoch. Default: `Date.now`. */
  nowMs?: () => number;
}

export interface CreationLimits {
  createsPerMinute: number;
  createsPerDay: number;
  bytesPerDay: number;
  nowMs: () => number;
}

/** An account's counters in the current minute and UTC day. */
export interface CreationUsage {
  createsThisMinute: number;
  createsToday: number;
  bytesToday: number;
}

/** The limit that refused a reservation, in the order they are checked. */
export type CreationRefusal = 'createsPerDay' | 'bytesPerDay' | 'createsPerMinute';

/**
 * The creation rates of api.md section 8: 10 per minute, 1,000 and 1 GiB per UTC day, per account.
 * @example new MemoryCreationLimiter({ ...DEFAULT_CREATION_LIMITS, createsPerMinute: 30 })
 */
export const DEFAULT_CREATION_LIMITS = {
  createsPerMinute: 10,
  createsPerDay: 1000,
  bytesPerDay: 1_073_741_824,
} as const;

/** Validates limit options once, at start-up, and fills in the defaults. */
export function resolveCreationLimits(options: CreationLimitsOptions = {}): CreationLimits {
  const limits = { ...DEFAULT_CREATION_LIMITS, nowMs: Date.now, ...options };
  for (const name of ['createsPerMinute', 'createsPerDay', 'bytesPerDay'] as const) {
    if (!Number.isSafeInteger(limits[name]) || limits[name] < 1) {
      throw new TypeError(`koa-model-gateway: ${name} must be a positive integer`);
    }
  }
  if (typeof limits.nowMs !== 'function') throw new TypeError('koa-model-gateway: nowMs must be a function');
  return limits;
}

/**
 * The 429 for a refusal (decisions.md, "Limits and the three 429 codes"): the minute limit
 * says when the next minute starts, the day limits when the next UTC day starts.
 */
export function refusalError(refusal: CreationRefusal, windows: ClockWindows, nowMs: number): GatewayError {
  switch (refusal) {
    case 'createsPerMinute':
      return errors.createRateExceeded(secondsUntil(windows.minute.endsAt, nowMs));
    case 'createsPerDay':
      return errors.createRateExceeded(secondsUntil(windows.day.endsAt, nowMs));
    case 'bytesPerDay':
      return errors.ingestionQuotaExceeded(secondsUntil(windows.day.endsAt, nowMs));
  }
}

/** Throws for a byte count that cannot be a file's size: a bug in the caller, not a client error. */
export function assertByteCount(bytes: number): void {
  if (!Number.isSafeInteger(bytes) || bytes < 0) {
    throw new TypeError(`koa-model-gateway: reserve() needs a non-negative integer byte count, got ${bytes}`);
  }
}
