import { pino, type Logger } from 'pino';

/**
 * The server's logger: JSON lines on stdout. Request headers are never logged, so no key can
 * reach a log line.
 * @example const logger = createLogger('info')
 */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'koa-model-gateway' } });
}
