import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Knex } from 'knex';

// The worker's whole program: one text whether the server runs compiled or from its sources
// through tsx, whose loader a worker thread does not get. It loads through
// process.getBuiltinModule, as Node runs it as CommonJS or, in a process started with
// --input-type=module, as a module, where there is no require. A statement that fails is
// answered as such; any other failure ends the worker ('error', then 'exit'). A reader
// (`workerData.readonly`) opens its connection read-only, answers each statement's rows and
// checkpoints nothing.
const WORKER = `
const { parentPort, workerData } = process.getBuiltinModule('node:worker_threads');
const Database = process.getBuiltinModule('node:module').createRequire(workerData.driver)(workerData.driver);
const database = new Database(workerData.filename, { fileMustExist: true, readonly: workerData.readonly });
database.pragma('busy_timeout = 5000');
if (workerData.readonly) {
  // A report yields the cores to model calls: on Linux a thread has a priority of its own, and
  // /proc/thread-self names it; elsewhere the reader keeps the process's.
  try {
    const os = process.getBuiltinModule('node:os');
    const thread = Number(process.getBuiltinModule('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
    os.setPriority(thread, os.constants.priority.PRIORITY_LOW);
  } catch {}
}
if (!workerData.readonly) {
  database.pragma('synchronous = NORMAL');
  database.pragma('wal_autocheckpoint = 0');
}
// Each statement is sent once (its id and text) and prepared at its first run; a run names it by
// its id: the text of an insert of many rows is not copied to this thread, nor looked up, each time.
const texts = new Map();
const statements = new Map();
const timer = workerData.readonly ? undefined : setInterval(() => database.pragma('wal_checkpoint(PASSIVE)'), workerData.checkpointIntervalMs);
parentPort.on('message', (message) => {
  if (message === 'close') {
    clearInterval(timer);
    database.close();
    parentPort.close();
    return;
  }
  if (message.define !== undefined) {
    texts.set(message.define, message.sql);
    return;
  }
  const { id, statement: which, bindings } = message;
  try {
    let statement = statements.get(which);
    if (statement === undefined) statements.set(which, (statement = database.prepare(texts.get(which))));
    if (workerData.readonly) parentPort.postMessage({ id, rows: statement.all(...bindings) });
    else {
      statement.run(...bindings);
      parentPort.postMessage({ id });
    }
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

/** A write (or read) that the worker of `sqliteWriter` (or `sqliteReader`) did not run: it failed or was closed before. */
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
  const worker = sqliteWorker({ filename, checkpointIntervalMs, readonly: false }, 'writer', onFailure);
  return {
    prepare(sql) {
      const statement = worker.define(sql);
      return async (bindings) => {
        await worker.run(statement, bindings);
      };
    },
    close: worker.close,
  };
}

/**
 * Queries whose rows are read away from the event loop. The Knex stores take one (`reportReads`)
 * for the admin API's reads over many rows; make one with `sqliteReader`.
 */
export interface ReportReads {
  /** Every row of `sql` (in the dialect of the store's Knex) with `bindings`. */
  all(sql: string, bindings: readonly unknown[]): Promise<unknown[]>;
}

/** The rows of `query`, read by `reportReads` when there is one and it has not gone; else by Knex's connection. */
export async function reportRows(query: Knex.QueryBuilder, reportReads: ReportReads | undefined): Promise<unknown[]> {
  if (reportReads !== undefined) {
    const { sql, bindings } = query.toSQL().toNative();
    try {
      return await reportReads.all(sql, bindings);
    } catch (err) {
      // The reader never ran it: Knex's connection will.
      if (!(err instanceof SqliteWriterGoneError)) throw err;
    }
  }
  return (await query) as unknown[];
}

/** The reader of `sqliteReader`. */
export interface SqliteReader extends ReportReads {
  /** Stops the worker once the reads sent before are done; resolves once it has closed its connection and ended. */
  close(): Promise<void>;
}

/**
 * A read-only connection of its own to the SQLite database at `filename` (in WAL mode, already
 * migrated), in a worker thread: it runs the queries given to it one at a time, in order, each
 * statement prepared once per SQL text. better-sqlite3 runs a query on the thread that calls it: a
 * report over many rows run on the server's connection holds its event loop, every model call
 * with it, for its whole length (issue 54). On Linux the thread runs at the lowest priority
 * (nice 19): on a busy machine a report waits for the model calls, not they for it. As a WAL
 * reader it sees committed rows only and never waits for the writer. `onFailure` is called once
 * if the worker fails or ends on its own; reads sent to it then fail with `SqliteWriterGoneError`,
 * and the caller may run them elsewhere.
 * @example
 * const reader = sqliteReader('data/gateway.sqlite', { onFailure: (err) => log.warn(err) });
 * const usage = new KnexUsageStore(knex, { reportReads: reader });
 */
export function sqliteReader(filename: string, options: Pick<SqliteWriterOptions, 'onFailure'>): SqliteReader {
  const worker = sqliteWorker({ filename, readonly: true }, 'reader', options.onFailure);
  return { all: async (sql, bindings) => (await worker.run(worker.define(sql), bindings)) ?? [], close: worker.close };
}

/** The thread of `sqliteWriter` and `sqliteReader`: one statement at a time, in order; a `readonly` one answers rows. */
function sqliteWorker(
  workerData: { filename: string; readonly: boolean; checkpointIntervalMs?: number },
  role: 'writer' | 'reader',
  onFailure: (err: Error) => void,
) {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER, { eval: true, workerData: { driver, ...workerData } });
  const waiting = new Map<number, { resolve: (rows: unknown[] | undefined) => void; reject: (err: Error) => void }>();
  let nextId = 0;
  // The statements sent to the worker: their ids by their text.
  const defined = new Map<string, number>();
  let closing = false;
  let gone: Error | undefined;
  let failure: Error | undefined;
  worker.on('error', (err) => (failure = err));
  worker.on('message', ({ id, rows, message, code }: { id: number; rows?: unknown[]; message?: string; code?: string }) => {
    const call = waiting.get(id);
    waiting.delete(id);
    if (waiting.size === 0) worker.unref();
    if (message === undefined) call?.resolve(rows);
    else call?.reject(Object.assign(new Error(message), { code }));
  });
  const ended = new Promise<void>((resolve) => {
    worker.once('exit', (code) => {
      gone = new SqliteWriterGoneError(closing ? `the SQLite ${role} is closed` : `the SQLite ${role} ended: ${failure?.message ?? `exit code ${code}`}`);
      for (const call of waiting.values()) call.reject(gone);
      waiting.clear();
      if (!closing) onFailure(failure ?? gone);
      resolve();
    });
  });
  worker.unref();
  return {
    /** The id `run` names `sql` by: sent to the worker the first time. */
    define(sql: string): number {
      let statement = defined.get(sql);
      if (statement === undefined) {
        statement = defined.size;
        defined.set(sql, statement);
        if (gone === undefined && !closing) worker.postMessage({ define: statement, sql });
      }
      return statement;
    },
    run(statement: number, bindings: readonly unknown[]): Promise<unknown[] | undefined> {
      return new Promise((resolve, reject) => {
        if (gone !== undefined || closing) {
          reject(gone ?? new SqliteWriterGoneError(`the SQLite ${role} is closed`));
          return;
        }
        const id = nextId++;
        // While a statement is under way, the worker keeps the process alive, as a query on a socket would.
        if (waiting.size === 0) worker.ref();
        waiting.set(id, { resolve, reject });
        worker.postMessage({ id, statement, bindings });
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
