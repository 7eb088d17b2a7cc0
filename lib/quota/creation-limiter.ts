/** What `CreationLimiter.reserve` spent, given back by `release` when the file is not created. */
export interface CreationReservation {
  /** Gives back everything the reservation spent. Safe to call more than once. */
  release(): Promise<void>;
}

/**
 * The rate limits on file creation (api.md section 8): creations per minute and per UTC day,
 * bytes per UTC day. Implementations: memory and Redis, on rate-limiter-flexible.
 */
export interface CreationLimiter {
  /**
   * Spends one creation and `bytes` for `account`, all or nothing. Throws a 429 `GatewayError`
   * (`createRateExceeded` / `ingestionQuotaExceeded`) when a limit refuses, spending nothing; throws
   * `StoreUnavailableError` when its backend cannot be reached.
   */
  reserve(account: string, bytes: number): Promise<CreationReservation>;
}
