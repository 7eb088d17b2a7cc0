import { extname } from 'node:path';
import { Worker } from 'node:worker_threads';
import { parseCommand, type CommandIo } from './command-line.js';

/**
 * The young generation of the server thread's heap, in MiB: three semi-spaces' worth, so 32 MiB
 * semi-spaces where Node's default is 16. A model call holds about 30 KB while it waits on its
 * provider: with twice the room, scavenges come half as often and far fewer calls live through two
 * of them into the old generation (docs/DECISIONS.md, "Performance"). V8 sizes the main thread's heap
 * when Node starts, from its flags alone, and a worker's from `resourceLimits`: so the server runs
 * in a worker thread, and `node dist/reference-server/cli.js serve` needs no flag to be fast.
 */
const SERVER_YOUNG_GENERATION_MB = 96;

/** The server thread's module, beside this one's: .js in the build, .ts run from source (`npm run gateway`). */
const SERVER_THREAD = new URL(`../server-thread${extname(import.meta.url)}`, import.meta.url);

/**
 * How the thread starts: the module itself, or, run from source, the module through tsx's loader,
 * which Node 20 does not pass on to worker threads.
 */
const threadStart = (): [URL | string, { eval?: boolean }] =>
  SERVER_THREAD.pathname.endsWith('.ts')
    ? [`import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(SERVER_THREAD.href)}); })`, { eval: true }]
    : [SERVER_THREAD, {}];

/** What the server thread says: a line for stdout or stderr, or, last, its exit code. */
export type ServerThreadMessage = { out: string } | { err: string } | { exitCode: number };

/**
 * `serve`: serves the API until SIGTERM or SIGINT, then stops gracefully; a second signal exits at
 * once. The server runs in a worker thread (reference-server/server-thread.ts), which this thread
 * passes the signal on to.
 */
export async function serveCommand(args: string[], io: CommandIo): Promise<number> {
  parseCommand(args, {}, 0);
  const env = Object.fromEntries(Object.entries(io.env).filter((entry): entry is [string, string] => entry[1] !== undefined));
  const [start, how] = threadStart();
  const thread = new Worker(start, {
    ...how,
    env,
    resourceLimits: { maxYoungGenerationSizeMb: SERVER_YOUNG_GENERATION_MB },
  });
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    // A second signal means "now".
    if (signalled) process.exit(1);
    signalled = true;
    thread.postMessage(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    return await new Promise<number>((resolve) => {
      let exitCode = 1;
      thread.on('message', (message: ServerThreadMessage) => {
        if ('out' in message) io.out(message.out);
        else if ('err' in message) io.err(message.err);
        else exitCode = message.exitCode;
      });
      // An exception nothing caught has stopped the thread, and ends the process with its stack,
      // as Node ends a process on one.
      thread.once('error', (err) => io.err(`koa-model-gateway: the server stopped on an exception nothing caught: ${err.stack ?? String(err)}`));
      thread.once('exit', () => resolve(exitCode));
    });
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}
