/**
 * Preloaded into a measured server (`node --import tsx --import ./bench/lib/loop-monitor.ts`):
 * records the event loop's delay, and on SIGUSR2 writes what it saw since the last signal to
 * BENCH_LOOP_FILE as JSON (milliseconds), then starts over. Bench-only: it changes nothing else.
 */
import { writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.BENCH_LOOP_FILE;
if (file) {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  process.on('SIGUSR2', () => {
    const ms = (ns: number) => ns / 1e6;
    writeFileSync(
      file,
      JSON.stringify({ max: ms(histogram.max), p50: ms(histogram.percentile(50)), p99: ms(histogram.percentile(99)), mean: ms(histogram.mean) }),
    );
    histogram.reset();
  });
}
