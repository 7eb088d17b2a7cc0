/**
 * A failed upstream attempt that the model handler retried (on another deployment, a fallback, or
 * after a wait), reported on `app.on('error')` so that every failed attempt leaves one log line.
 * The client never sees it: it gets the answer of a later attempt, or the last one's error.
 * @example app.on('error', (err) => { if (err instanceof AttemptFailedError) logger.warn({ provider: err.provider, outcome: err.outcome }, 'attempt failed') })
 */
export class AttemptFailedError extends Error {
  override readonly name = 'AttemptFailedError';

  constructor(
    /** The provider id and the upstream model of the deployment that failed. */
    readonly provider: string,
    readonly upstreamModel: string,
    /** Its number among the call's attempts, from 1. */
    readonly attempt: number,
    /** What happened: an HTTP status, `timeout`, or the error's code (ECONNREFUSED, ...). */
    readonly outcome: string,
    options?: { cause?: unknown },
  ) {
    super(`attempt ${attempt} on provider '${provider}' (${upstreamModel}) failed: ${outcome}`, options);
  }
}
