import type { Logger } from 'pino';
import type { SweepResult } from 'koa-model-gateway/files';

/** What one run removed: expired files, orphaned blobs, temp files of uploads cut short by a crash, and usage rows past their retention. */
export interface SweepReport extends SweepResult {
  staleUploads: number;
  usageRows: number;
}

export interface Sweeper {
  /** Stops the timer and waits for a sweep in progress to end. */
  stop(): Promise<void>;
}

/**
 * Runs `sweep` every `intervalSeconds` on an unref'd timer (it never keeps the process alive),
 * one run at a time. Failures are logged and the next run tries again. Several processes may
 * each run one: `sweep()` is safe to run concurrently.
 * @example const sweeper = startSweeper(() => sweepDeployment(config, stores), 300, logger)
 */
export function startSweeper(sweep: () => Promise<SweepReport>, intervalSeconds: number, logger: Logger): Sweeper {
  let running: Promise<void> | undefined;
  const run = () => {
    if (running) return;
    running = sweep()
      .then((result) => {
        const removed = result.expired + result.orphans + result.staleUploads + result.usageRows > 0;
        logger[removed ? 'info' : 'debug']({ ...result }, 'sweep');
      })
      .catch((err: unknown) => logger.warn({ err }, 'sweep failed; trying again at the next interval'))
      .finally(() => {
        running = undefined;
      });
  };
  const timer = setInterval(run, intervalSeconds * 1000).unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
