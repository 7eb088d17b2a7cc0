import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';

/** A redis-server of the test's own, which it may stop, pause and start again. */
export interface OwnRedis {
  url: string;
  /** Kills the server (SIGKILL) and waits for it to exit: everything in it is lost. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
  /** SIGSTOP: the connection stays open and nothing answers. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** Starts `redis-server` (from PATH) on a free loopback port, without persistence. */
export async function ownRedis(): Promise<OwnRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;

  async function start(): Promise<void> {
    const started = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child = started;
    await new Promise<void>((resolve, reject) => {
      let output = '';
      started.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) resolve();
      });
      started.once('error', reject);
      started.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output}`)));
    });
  }

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    start,
    async kill() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    },
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
  };
}
