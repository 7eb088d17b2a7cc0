import type { UsageRecord, UsageStore } from './usage-store.js';

/** The timers a recorder flushes on; tests pass a fake clock. */
export interface RecorderTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface UsageRecorderOptions {
  store: UsageStore;
  /** Records written by one insert; as soon as this many wait, they are written. Default 100. */
  maxBatch?: number;
  /** The longest a record waits to be written, in ms; also the pause before a failed batch is tried again. Default 1000. */
  flushIntervalMs?: number;
  /**
   * Records held while the store fails (waiting and being written); a record arriving past it is
   * dropped and counted in `dropped`. Default 10,000.
   */
  maxBuffered?: number;
  /**
   * Hears what the recorder could not do: a failed write (its records kept for the next try), the
   * first record dropped since the last write that succeeded, records lost at `close()`. Never
   * thrown at the caller of `record`. Default: `process.emitWarning`.
   */
  onError?: (err: Error) => void;
  /** Default: the global timers, unref'd so that a waiting flush does not keep the process alive. */
  timers?: RecorderTimers;
}

/** What `usageRecorder()` returns. */
export interface UsageRecorder {
  /** Queues one record: synchronous, no I/O. A malformed record is a `TypeError` (a bug in the caller). */
  record(record: UsageRecord): void;
  /** Writes everything queued before the call; resolves when done or failed (failures go to `onError`). */
  flush(): Promise<void>;
  /** Writes what is queued, once, and stops; records after it are dropped. Call it on shutdown. */
  close(): Promise<void>;
  /** Records queued or being written. */
  readonly pending: number;
  /** Records dropped so far: over `maxBuffered`, after `close()`, or left unwritten by `close()`. */
  readonly dropped: number;
}

const DEFAULTS = { maxBatch: 100, flushIntervalMs: 1000, maxBuffered: 10_000 };

const realTimers: RecorderTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

const isCount = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0;
const isDuration = (value: unknown) => typeof value === 'number' && Number.isFinite(value) && value >= 0;
const isName = (value: unknown) => typeof value === 'string' && value !== '';

/** The first field of `record` that is missing or of the wrong kind, if any. */
function invalidField(record: UsageRecord): keyof UsageRecord | undefined {
  // Field by field, not a loop over a table of checks: this runs on every model call.
  if (!isDuration(record.time)) return 'time';
  if (!isName(record.requestId)) return 'requestId';
  if (!isName(record.keyId)) return 'keyId';
  if (!isName(record.account)) return 'account';
  if (!isName(record.endpoint)) return 'endpoint';
  if (record.model !== null && !isName(record.model)) return 'model';
  if (record.provider !== null && !isName(record.provider)) return 'provider';
  if (!(Number.isInteger(record.status) && record.status >= 100 && record.status <= 599)) return 'status';
  if (typeof record.stream !== 'boolean') return 'stream';
  if (!isCount(record.inputTokens)) return 'inputTokens';
  if (!isCount(record.outputTokens)) return 'outputTokens';
  if (!isCount(record.attachments)) return 'attachments';
  if (!isDuration(record.latencyMs)) return 'latencyMs';
  if (record.upstreamFirstByteMs !== null && !isDuration(record.upstreamFirstByteMs)) return 'upstreamFirstByteMs';
  if (record.upstreamMs !== null && !isDuration(record.upstreamMs)) return 'upstreamMs';
  if (!isCount(record.costPicoUsd)) return 'costPicoUsd';
  return undefined;
}

// Checked as it is recorded: a record the store refuses would fail its whole batch at every try.
function assertUsageRecord(record: UsageRecord): void {
  if (typeof record !== 'object' || record === null) throw new TypeError("koa-model-gateway: usage record has an invalid 'time'");
  const field = invalidField(record);
  if (field !== undefined) throw new TypeError(`koa-model-gateway: usage record has an invalid '${field}'`);
}

/**
 * Batches usage records in memory and writes them to `store` in the background: by count
 * (`maxBatch`) and by time (`flushIntervalMs`), so no request waits for the database.
 *
 * What a crash (SIGKILL, out of memory, power loss) can lose: the records not yet written, that is
 * at most `flushIntervalMs` worth of calls and never more than `maxBatch` waiting plus one batch
 * being written; while the store is failing, up to `maxBuffered`. `close()` on SIGTERM/SIGINT loses
 * nothing unless the store fails then too. A batch either fails whole and is tried again, or is written
 * whole (both stores insert a batch in one transaction), so no record is written twice.
 *
 * How a model endpoint uses it: when the call ends (its answer sent or refused, in a `finally`),
 * `recorder.record({ time, requestId, keyId, account, endpoint, model, provider, status, stream,
 * inputTokens, outputTokens, attachments, latencyMs, upstreamFirstByteMs, upstreamMs, costPicoUsd })`; the server
 * calls `await recorder.close()` after its HTTP server has closed.
 * @example
 * const recorder = usageRecorder({ store: new KnexUsageStore(knex), onError: (err) => logger.warn({ err }, 'usage') })
 * recorder.record(record)
 * await recorder.close()
 */
export function usageRecorder(options: UsageRecorderOptions): UsageRecorder {
  const { store, onError = (err: Error) => process.emitWarning(err), timers = realTimers } = options;
  const { maxBatch, flushIntervalMs, maxBuffered } = { ...DEFAULTS, ...options };
  if (typeof store?.insert !== 'function') throw new TypeError('koa-model-gateway: usageRecorder() needs a UsageStore as `store`');
  for (const [name, value] of Object.entries({ maxBatch, flushIntervalMs, maxBuffered })) {
    if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`koa-model-gateway: usageRecorder() ${name} must be a positive integer`);
  }
  if (maxBuffered < maxBatch) throw new TypeError('koa-model-gateway: usageRecorder() maxBuffered must be at least maxBatch');
  if (typeof onError !== 'function') throw new TypeError('koa-model-gateway: usageRecorder() onError must be a function');

  let waiting: UsageRecord[] = [];
  let writing = 0;
  let dropped = 0;
  // Set from the first record dropped until a write succeeds: one report per outage, not per record.
  let dropReported = false;
  // Set from a failed write until one succeeds: retries wait for the timer, not the next record.
  let failing = false;
  let timer: unknown;
  let running: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  function report(err: Error): void {
    try {
      onError(err);
    } catch {
      // A hook that throws must not turn a write into an unhandled rejection.
    }
  }

  function schedule(): void {
    if (timer === undefined && closing === undefined) {
      timer = timers.setTimeout(() => {
        timer = undefined;
        void flushWaiting(true);
      }, flushIntervalMs);
    }
  }

  /** Writes full batches, and with `all` the rest too; stops at the first failure. Never rejects. */
  async function write(all: boolean): Promise<void> {
    while (waiting.length >= maxBatch || (all && waiting.length > 0)) {
      const batch = waiting.splice(0, maxBatch);
      writing = batch.length;
      try {
        await store.insert(batch);
        dropReported = false;
        failing = false;
      } catch (err) {
        failing = true;
        waiting = [...batch, ...waiting];
        report(new Error(`koa-model-gateway: ${batch.length} usage records not written yet, kept for the next try`, { cause: err }));
        schedule();
        return;
      } finally {
        writing = 0;
      }
    }
  }

  /** Runs a write after the one under way: one insert at a time, in order. */
  function flushWaiting(all: boolean): Promise<void> {
    const run = (running ?? Promise.resolve()).then(() => write(all));
    running = run;
    void run.then(() => {
      if (running === run) running = undefined;
    });
    return run;
  }

  function drop(reason: string): void {
    dropped += 1;
    if (!dropReported) {
      dropReported = true;
      report(new Error(`koa-model-gateway: usage records dropped: ${reason}`));
    }
  }

  return {
    record(record) {
      assertUsageRecord(record);
      if (closing !== undefined) return drop('the recorder is closed');
      if (waiting.length + writing >= maxBuffered) return drop(`${maxBuffered} records wait for the store already`);
      waiting.push({ ...record });
      if (waiting.length >= maxBatch && running === undefined && !failing) void flushWaiting(false);
      schedule();
    },
    flush: () => flushWaiting(true),
    close() {
      closing ??= (async () => {
        if (timer !== undefined) timers.clearTimeout(timer);
        timer = undefined;
        await flushWaiting(true);
        if (waiting.length > 0) {
          dropped += waiting.length;
          report(new Error(`koa-model-gateway: ${waiting.length} usage records lost at close: the store did not take them`));
          waiting = [];
        }
      })();
      return closing;
    },
    get pending() {
      return waiting.length + writing;
    },
    get dropped() {
      return dropped;
    },
  };
}
