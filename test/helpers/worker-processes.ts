import { spawn } from 'node:child_process';

/**
 * Runs `script` (compiled JavaScript) once per argument list, each in a process of its own.
 * A script prints `ready` once set up, then waits for a line on stdin: every process gets it at
 * the same moment, so that their work overlaps. Resolves with what each printed after `ready`;
 * rejects when one exits with an error.
 */
export async function runTogether(script: string, argLists: readonly string[][]): Promise<string[]> {
  const workers = argLists.map((args) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.setEncoding('utf8');
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: string) => {
        output += chunk;
        if (output.startsWith('ready\n')) resolve();
      });
      child.once('exit', () => reject(new Error(`worker exited early: ${output}`)));
    });
    const done = new Promise<string>((resolve, reject) => {
      // 'close', not 'exit': the process may exit before its last output has been read.
      child.once('close', (code) => {
        if (code !== 0) reject(new Error(`worker exited with ${code}: ${output}`));
        else resolve(output.slice('ready\n'.length));
      });
    });
    return { child, ready, done };
  });
  try {
    await Promise.all(workers.map((worker) => worker.ready));
  } catch (err) {
    for (const worker of workers) worker.child.kill();
    throw err;
  }
  for (const worker of workers) worker.child.stdin.end('go\n');
  return Promise.all(workers.map((worker) => worker.done));
}
