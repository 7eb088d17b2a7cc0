import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { openSync, readFileSync, writeSync } from 'node:fs';

/** Kernel clock ticks per second: the unit of utime and stime in /proc/PID/stat. */
const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

function hasTaskset(): boolean {
  try {
    execFileSync('taskset', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the servers and the load generator get a core each: needs taskset and two cores.
 * BENCH_PIN=0 turns pinning off.
 */
export const PINNING = process.env.BENCH_PIN !== '0' && availableParallelism() >= 2 && hasTaskset();

/** The core the measured server runs on, and the one the load generator (and a mock upstream) runs on. */
export const SERVER_CORE = 0;
export const LOAD_CORE = 1;

/** `command` prefixed with taskset to run on `core`, when pinning. */
export function pinned(core: number, command: string[]): string[] {
  return PINNING ? ['taskset', '-c', String(core), ...command] : command;
}

/** What `keepIdleCoresPolling()` achieved, for the report; `undefined` until it is called. */
let idleCores: string | undefined;

/**
 * Keeps idle cores polling instead of halting while this process lives: a PM QoS request for a
 * wake-up latency of 0 µs, held as long as /dev/cpu_dma_latency stays open (what tuned's
 * latency-performance profile does). Without it, on a VM, every response that wakes the idle
 * load generator costs the server a wake-up IPI and a VM exit, and a slower server, whose client
 * is more often asleep, pays more of them: per request 1 µs for bare Koa, 5 µs for the 401 and
 * 10 µs for the retrieve (perf; docs/DECISIONS.md, "Performance"). Needs root; BENCH_IDLE_POLL=0 turns it off.
 */
function keepIdleCoresPolling(): void {
  if (idleCores !== undefined) return;
  if (process.env.BENCH_IDLE_POLL === '0') {
    idleCores = 'idle cores left as the machine sets them (BENCH_IDLE_POLL=0)';
    return;
  }
  try {
    // Never closed: the request lasts until this process exits.
    writeSync(openSync('/dev/cpu_dma_latency', 'w'), Buffer.from(Int32Array.of(0).buffer));
    idleCores = 'idle cores poll (cpu_dma_latency 0)';
  } catch (err) {
    idleCores = `idle cores may halt (cpu_dma_latency: ${(err as NodeJS.ErrnoException).code ?? String(err)})`;
  }
}

/**
 * Makes this process the load generator, as every scenario starts: every thread of it moved to
 * the load core (autocannon runs in this process), idle cores kept polling while it lives.
 */
export function becomeLoadGenerator(): void {
  if (PINNING) execFileSync('taskset', ['-a', '-cp', String(LOAD_CORE), String(process.pid)], { stdio: 'ignore' });
  keepIdleCoresPolling();
}

/** CPU time (user + system) `pid` has used so far, every thread, in microseconds. */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces: fields are counted from after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime: fields 14 and 15
  return (ticks * 1e6) / CLOCK_TICKS;
}

function hasPerfInstructions(): boolean {
  // perf stat reports on stderr: "<count>,,instructions,..." or "<not supported>,,instructions".
  const result = spawnSync('perf', ['stat', '-x,', '-e', 'instructions', 'true'], { encoding: 'utf8' });
  return /^\d+,/m.test(result.stderr ?? '');
}

/** Whether `perf stat` can count instructions here (linux-perf installed, counters exposed). */
export const PERF = process.env.BENCH_PERF !== '0' && hasPerfInstructions();

/**
 * Counts the instructions `pid` executes (every thread, user and kernel) until stopped, with
 * `perf stat`: unlike CPU time, the count barely moves when other work shares the machine.
 * Without perf, stop() resolves to NaN.
 */
export function countInstructions(pid: number): { stop(): Promise<number> } {
  if (!PERF) return { stop: async () => Number.NaN };
  const perf = spawn('perf', ['stat', '-x,', '-e', 'instructions', '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let report = '';
  perf.stderr.on('data', (chunk: Buffer) => (report += chunk.toString()));
  return {
    async stop() {
      const exited = once(perf, 'exit');
      perf.kill('SIGINT');
      await exited;
      return Number(/^(\d+),/m.exec(report)?.[1] ?? Number.NaN);
    },
  };
}

/** Resident memory of `pid` now and at its peak (VmRSS, VmHWM), in bytes. */
export function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

/** Samples `pid`'s resident memory every `intervalMs` until stopped; returns the largest seen. */
export function sampleRss(pid: number, intervalMs = 20): { stop(): number } {
  let max = memory(pid).rss;
  const timer = setInterval(() => {
    try {
      max = Math.max(max, memory(pid).rss);
    } catch {
      // the process has ended: keep what was seen
    }
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      return max;
    },
  };
}

/** The machine, for the report: one line with the cores, Node, the date and how busy the machine was. */
export function machine(): string {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const cpu = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? 'unknown CPU';
  // Not availableParallelism(): that counts only the cores this process is pinned to.
  const cores = cpus().length;
  const load = loadavg()
    .map((value) => value.toFixed(1))
    .join(' ');
  const idle = idleCores ? `, ${idleCores}` : '';
  return `${cores} cores (${cpu}), Node ${process.version}, Linux ${readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}, ${new Date().toISOString()}, load average ${load}${idle}`;
}
