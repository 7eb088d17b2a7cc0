#!/usr/bin/env node
import { missingPackages } from './peers.js';

// A reader that stops early (`keys list | head`) closes the pipe: that ends the output, not in a crash.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

// Checked before the commands are loaded, since they import knex and pino (the database driver and
// ioredis are checked once the configuration asks for them).
const missing = missingPackages(['knex', 'pino']);
if (missing.length > 0) {
  process.stderr.write(
    `koa-model-gateway: the reference server needs ${missing.join(' and ')}, not installed: ` +
      `npm install ${missing.join(' ')} better-sqlite3 (pg instead of better-sqlite3 for PostgreSQL)\n`,
  );
  process.exit(1);
}
const { runCommandLine } = await import('./commands/index.js');

process.exitCode = await runCommandLine(process.argv.slice(2), {
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
});
