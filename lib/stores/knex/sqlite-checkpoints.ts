import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

// The worker's whole program, run as CommonJS: one text whether the server runs compiled or from
// its sources through tsx, whose loader a worker thread does not get. Its failures end it ('error', then 'exit').
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const database = new Database(workerData.filename, { fileMustExist: true });
const timer = setInterval(() => database.pragma('wal_checkpoint(PASSIVE)'), workerData.intervalMs);
parentPort.once('message', () => {
  clearInterval(timer);
  database.close();
  parentPort.close();
});
`;

export interface Checkpointer {
  /** Stops the worker; resolves once it has closed its connection and ended. */
  close(): Promise<void>;
}

/**
 * Checkpoints the WAL of the SQLite database at `filename` every `intervalMs` from a worker thread
 * with a connection of its own (`wal_checkpoint(PASSIVE)`, which neither waits for nor blocks the
 * server's reads and writes). SQLite's automatic checkpoint runs inside the commit that fills the
 * WAL: through better-sqlite3, on the event loop, milliseconds in which no request moves
 * (BENCHMARKS.md, session 8). Set `wal_autocheckpoint = 0` on your own connections while it runs.
 * `onFailure` is called once if the worker fails or ends on its own, so that the caller can give
 * checkpoints back to SQLite (`wal_autocheckpoint = 1000`). The worker does not keep the process alive.
 * @example const checkpointer = checkpointInWorker('data/gateway.sqlite', 1000, (err) => log.warn(err))
 */
export function checkpointInWorker(filename: string, intervalMs: number, onFailure: (err: Error) => void): Checkpointer {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(WORKER, { eval: true, workerData: { driver, filename, intervalMs } });
  let closing = false;
  let failure: Error | undefined;
  worker.on('error', (err) => (failure = err));
  const ended = new Promise<void>((resolve) => {
    worker.once('exit', (code) => {
      if (!closing) onFailure(failure ?? new Error(`the checkpoint worker ended (exit code ${code})`));
      resolve();
    });
  });
  worker.unref();
  return {
    close() {
      closing = true;
      worker.postMessage('close');
      return ended;
    },
  };
}
