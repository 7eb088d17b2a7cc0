import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './server-process.js';

export interface RunningExample {
  url: string;
  /** The `API key:` the example printed, when it prints one. */
  key: string | undefined;
  stop(): Promise<void>;
}

/**
 * `examples/<file>` in a process of its own, on a random port; resolves once it prints
 * `Listening on <url>` (and its `API key:` line, when `printsKey`). It runs as `npm test` compiled
 * it (dist/examples), importing the package by its name as the compiled package resolves it.
 */
export function startExample(file: string, env: Record<string, string> = {}, printsKey = true): Promise<RunningExample> {
  const child = spawn(process.execPath, [join('dist/examples', file.replace(/\.ts$/, '.js'))], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`examples/${file} did not start within 30 s: ${stderr}`));
    }, 30_000);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`examples/${file} exited before listening: ${stderr}`));
    });
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      const url = /^Listening on (\S+)$/m.exec(stdout)?.[1];
      const key = /^API key: (\S+)$/m.exec(stdout)?.[1];
      if (url === undefined || (printsKey && key === undefined)) return;
      clearTimeout(timer);
      resolve({
        url,
        key,
        stop: () => {
          child.kill('SIGTERM');
          return exited;
        },
      });
    });
  });
}
