import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

// The worker's whole program, run as CommonJS: one text whether the server runs compiled or from
// its sources through tsx, whose loader a worker thread does not get. A statement that fails is
// answered as such; any other failure ends the worker ('error', then 'exit').
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const database = new Database(workerData.filename, { fileMustExist: true });
database.pragma('busy_timeout = 5000');
database.pragma('synchronous = NORMAL');
database.pragma('wal_autocheckpoint = 0');
const statements = new Map();
const timer = setInterval(() => database.pragma('wal_checkpoint(PASSIVE)'), workerData.checkpointIntervalMs);
parentPort.on('message', (message) => {
  if (message === 'close') {
    clearInterval(timer);
    database.close();
    parentPort.close();
    return;
  }
  const { id, sql, bindings } = message;
  try {
    let statement = statements.get(sql);
    if (statement === undefined) statements.set(sql, (statement = database.prepare(sql)));
    statement.run(...bindings);
    parentPort.postMessage({ id });
  } catch (err) {
    parentPort.postMessage({ id, message: String(err && err.message), code: err && err.code });
  }
});
`;

/**
 * Writes by a fixed SQL text, prepared once, run away from the event loop. `KnexUsageStore` takes
 * one (`preparedWrites`) for its batch inserts; make one with `sqliteWriter`.
 */
export interface PreparedWrites {
  /** A write by `sql` (in the dialect of the store's Knex): resolves once it has run with `bindings` and committed. */
  prepare(sql: string): (bindings: readonly unknown[]) => Promise<void>;
}

/** The writer of `sqliteWriter`. */
export interface SqliteWriter extends PreparedWrites {
  /** Stops the worker once the writes sent before are done; resolves once it has closed its connection and ended. */
  close(): Promise<void>;
}

export interface SqliteWriterOptions {
  /** How often the worker checkpoints the WAL, in milliseconds. Default 1000. */
  checkpointIntervalMs?: number;
  /**
   * Called once if the worker fails or ends on its own (the database file gone, the driver not
   * loadable), so that the caller can give checkpoints back to SQLite (`wal_autocheckpoint =
   * 1000`). Writes sent to it then fail, with `SqliteWriterGoneError`.
   */
  onFailure: (err: Error) => void;
}

/** A write that the worker of `sqliteWriter` did not run: it failed or was closed before. */
export class SqliteWriterGoneError extends Error {}

/**
 * A connection of its own to the SQLite database at `filename` (in WAL mode, already migrated), in
 * a worker thread: it runs the writes given to it one at a time, in order, each statement prepared
 * once, and checkpoints the WAL every `checkpointIntervalMs` (`wal_checkpoint(PASSIVE)`, which
 * neither waits for nor blocks the other connections). better-sqlite3 runs a statement on the
 * thread that calls it: a batch insert or a checkpoint made on the server's connection holds its
 * event loop, and every request with it, for its whole length (BENCHMARKS.md). Its connection
 * waits up to 5 s for a lock (`busy_timeout`) and syncs at checkpoints (`synchronous = NORMAL`, as
 * the reference server's). Set `wal_autocheckpoint = 0` on your own connections while it runs, and
 * `busy_timeout` for the moments its transaction holds the write lock. A write rejected with
 * `SqliteWriterGoneError` was not run: the worker had ended before it came to it. The worker keeps
 * the process alive only while a write is under way.
 * @example
 * const writer = sqliteWriter('data/gateway.sqlite', { onFailure: (err) => log.warn(err) });
 * const usage = new KnexUsageStore(knex, { preparedWrites: writer });
 */
export function sqliteWriter(filename: string, options: SqliteWriterOptions): SqliteWriter {
  const { checkpointIntervalMs = 1000, onFailure } = options;
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER, { eval: true, workerData: { driver, filename, checkpointIntervalMs } });
  const waiting = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  let nextId = 0;
  let closing = false;
  let gone: Error | undefined;
  let failure: Error | undefined;
  worker.on('error', (err) => (failure = err));
  worker.on('message', ({ id, message, code }: { id: number; message?: string; code?: string }) => {
    const write = waiting.get(id);
    waiting.delete(id);
    if (waiting.size === 0) worker.unref();
    if (message === undefined) write?.resolve();
    else write?.reject(Object.assign(new Error(message), { code }));
  });
  const ended = new Promise<void>((resolve) => {
    worker.once('exit', (code) => {
      gone = new SqliteWriterGoneError(closing ? 'the SQLite writer is closed' : `the SQLite writer ended: ${failure?.message ?? `exit code ${code}`}`);
      for (const write of waiting.values()) write.reject(gone);
      waiting.clear();
      if (!closing) onFailure(failure ?? gone);
      resolve();
    });
  });
  worker.unref();
  return {
    prepare(sql) {
      return (bindings) =>
        new Promise<void>((resolve, reject) => {
          if (gone !== undefined || closing) {
            reject(gone ?? new SqliteWriterGoneError('the SQLite writer is closed'));
            return;
          }
          const id = nextId++;
          // While a write is under way, the worker keeps the process alive, as a query on a socket would.
          if (waiting.size === 0) worker.ref();
          waiting.set(id, { resolve, reject });
          worker.postMessage({ id, sql, bindings });
        });
    },
    close() {
      if (!closing) {
        closing = true;
        worker.postMessage('close');
      }
      return ended;
    },
  };
}
