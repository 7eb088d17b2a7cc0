import { errors } from '../../errors/gateway-error.js';
import type { TokenUsage } from '../../usage/token-usage.js';
import { unreadableStreamEvent } from '../answer.js';
import type { StreamPart, StreamWriter } from './neutral.js';

/**
 * A neutral stream written in the client's format, whoever reads it (a provider format's reader,
 * or a neutral provider): `usage` kept up to date with what its parts tell. Content before the
 * start fails it, and so does an end without a finish: the client never gets an answer that looks
 * whole when it is not.
 */
export class ClientStream {
  readonly #writer: StreamWriter;
  readonly #usage: TokenUsage;
  #started = false;
  #finished = false;

  constructor(writer: StreamWriter, usage: TokenUsage) {
    this.#writer = writer;
    this.#usage = usage;
  }

  /** The client's events for `parts` ('' for none). */
  write(parts: Iterable<StreamPart>): string {
    let out = '';
    for (const part of parts) {
      if (part.type === 'start') this.#started = true;
      else if (!this.#started) throw unreadableStreamEvent('an event before the one that starts its answer');
      if ((part.type === 'start' || part.type === 'finish') && part.usage) Object.assign(this.#usage, part.usage);
      if (part.type === 'finish') this.#finished = true;
      out += this.#writer.write(part);
    }
    return out;
  }

  /** True once the finish has been written. */
  get finished(): boolean {
    return this.#finished;
  }

  /** What ends the client's stream once the upstream's has ended; throws when it ended before its finish. */
  end(): string {
    if (this.#finished) return this.#writer.end();
    const err = errors.upstreamError();
    err.cause = "the upstream's stream ended before its finish";
    throw err;
  }
}
