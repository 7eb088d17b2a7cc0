import { loadConfigWithModules } from '../config.js';
import { createLogger } from '../logger.js';
import { serve } from '../server.js';
import { parseCommand, type CommandIo } from './command-line.js';

/** `serve`: serves the API until SIGTERM or SIGINT. */
export async function serveCommand(args: string[], io: CommandIo): Promise<number> {
  parseCommand(args, {}, 0);
  const config = await loadConfigWithModules(io.env);
  await serve(config, createLogger(config.logLevel));
  return 0;
}
