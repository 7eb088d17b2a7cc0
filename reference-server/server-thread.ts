/**
 * The worker thread `koa-model-gateway serve` runs the server in (commands/serve.ts says why): it
 * loads the configuration from its environment, serves until the command passes a signal on, then
 * stops gracefully. Its lines for stdout and stderr, and its exit code, go back to the command as
 * messages; the log is written to stdout directly.
 */
import { once } from 'node:events';
import { parentPort } from 'node:worker_threads';
import type { Logger } from 'pino';
import { reportFailure, type CommandIo } from './commands/command-line.js';
import type { ServerThreadMessage } from './commands/serve.js';
import { loadConfigWithModules } from './config.js';
import { createLogger } from './logger.js';

if (parentPort === null) throw new Error('koa-model-gateway: server-thread.js is the thread of `koa-model-gateway serve`, not a script');
const port = parentPort;
const tell = (message: ServerThreadMessage) => port.postMessage(message);
const io: CommandIo = { env: process.env, out: (text) => tell({ out: text }), err: (text) => tell({ err: text }) };

/** How long the thread may take to end once the server has stopped. */
const EXIT_AFTER_STOP_MS = 1000;

let exitCode: number;
let logger: Logger | undefined;
try {
  const config = await loadConfigWithModules(io.env);
  logger = createLogger(config.logLevel);
  // Loaded once the configuration is known to be good: a start that fails on it answers sooner.
  const { startGateway } = await import('./server.js');
  const gateway = await startGateway(config, logger);
  const [signal] = (await once(port, 'message')) as [NodeJS.Signals];
  await gateway.stop({ signal });
  exitCode = 0;
} catch (err) {
  exitCode = reportFailure(err, io);
}
tell({ exitCode });
// A store that did not close (a stalled database's socket) would keep the thread alive: it may not
// hold the exit up. A thread whose loop empties ends before this. The log's last lines are written
// first: in a worker thread, pino writes them asynchronously and nothing flushes them at exit.
setTimeout(() => (logger ? logger.flush(() => process.exit(exitCode)) : process.exit(exitCode)), EXIT_AFTER_STOP_MS).unref();
