import { StringDecoder } from 'node:string_decoder';
import { errors } from '../errors/gateway-error.js';

const LINE_END = /\r\n|\r|\n/;
// The next line-end character, from `lastIndex`: a native search, where a loop over every character would not be.
const LINE_END_CHAR = /[\r\n]/g;
const CR = 0x0d;
const LF = 0x0a;

/**
 * Cuts an upstream's event-stream bytes into whole events, each with the blank line that ends it,
 * passed on as soon as it is complete. Holding back only a partial event means an error event
 * written after a failure never lands in the middle of one. Synchronous, one call per chunk, and
 * linear: each character is looked at once, and a partial event is kept as its pieces, joined once
 * when it ends. An event longer than `maxEventBytes` (default: no limit) is refused with a 502
 * naming the limit, before more of it is kept: thrown by the call that reads it, or, when that call
 * completed events before it, by the next (the events before a refusal are passed on).
 * @example const splitter = new EventSplitter({ maxEventBytes: 32 * 1024 * 1024 }); for (const event of splitter.push(chunk)) res.write(event)
 */
export class EventSplitter {
  readonly #decoder = new StringDecoder('utf8');
  readonly #maxEventBytes: number;
  /** The partial event so far, in pieces, and its size in bytes. */
  #pieces: string[] = [];
  #pendingBytes = 0;
  /** Line ends in a row at the end of what was read (a \r\n is one); 0 when the last character was not one. */
  #lineEnds = 0;
  /** The last character read was a \r: a \n next belongs to it. */
  #afterCR = false;
  /** The blank line that ends the event ended in a \r: the event ends after it, or after the \n that may follow. */
  #endsAtCR = false;
  /** An event over the limit, found after events that were passed on. */
  #refusal: unknown;

  constructor({ maxEventBytes = Number.POSITIVE_INFINITY }: { maxEventBytes?: number } = {}) {
    this.#maxEventBytes = maxEventBytes;
  }

  /** The events that `chunk` completes, in order. */
  push(chunk: Buffer | string): string[] {
    return this.#cutOrRefuse(typeof chunk === 'string' ? chunk : this.#decoder.write(chunk));
  }

  /** The events of what is left when the upstream ends normally: what follows the last blank line is one more. */
  end(): string[] {
    const events = this.#cutOrRefuse(this.#decoder.end());
    if (this.#pieces.length > 0) events.push(this.#take(''));
    this.#lineEnds = 0;
    this.#afterCR = false;
    this.#endsAtCR = false;
    return events;
  }

  #cutOrRefuse(text: string): string[] {
    if (this.#refusal !== undefined) throw this.#refusal;
    const events: string[] = [];
    try {
      this.#cut(text, events);
    } catch (err) {
      if (events.length === 0) throw err;
      this.#refusal = err;
    }
    return events;
  }

  /** Adds the events `text` completes to `events`. */
  #cut(text: string, events: string[]): void {
    let start = 0;
    if (this.#endsAtCR && text.length > 0) {
      // The \r that ended the last chunk ended an event: with this \n, if it is one.
      start = text.charCodeAt(0) === LF ? 1 : 0;
      events.push(this.#take(text.slice(0, start)));
      this.#restart();
    }
    // Where the last line-end character was: -1, the last character of the chunk before.
    let previous = this.#lineEnds > 0 ? start - 1 : -2;
    LINE_END_CHAR.lastIndex = start;
    for (let match = LINE_END_CHAR.exec(text); match !== null; match = LINE_END_CHAR.exec(text)) {
      const at = match.index;
      if (at !== previous + 1) this.#restart();
      previous = at;
      const isCR = text.charCodeAt(at) === CR;
      if (!isCR && this.#afterCR) {
        // The \n of a \r\n: one line end, counted with its \r.
        this.#afterCR = false;
        continue;
      }
      this.#afterCR = isCR;
      if (++this.#lineEnds < 2) continue;
      // A blank line: the event ends after it, a \r\n whole. A \r last may be the first half of a \r\n still on its way.
      let end = at + 1;
      if (isCR && end === text.length) {
        this.#endsAtCR = true;
        break;
      }
      if (isCR && text.charCodeAt(end) === LF) end++;
      events.push(this.#take(text.slice(start, end)));
      start = end;
      previous = end - 1;
      LINE_END_CHAR.lastIndex = end;
      this.#restart();
    }
    if (previous !== text.length - 1) this.#restart();
    if (start < text.length) this.#keep(text.slice(start));
  }

  /** What follows is not a line end, or begins a new event: no line end is counted before it. */
  #restart(): void {
    this.#lineEnds = 0;
    this.#afterCR = false;
    this.#endsAtCR = false;
  }

  /** Keeps a piece of the partial event, refusing the event once it is over the limit. */
  #keep(piece: string): void {
    this.#pendingBytes += Buffer.byteLength(piece);
    if (this.#pendingBytes > this.#maxEventBytes) throw errors.upstreamAnswerTooLarge(this.#maxEventBytes);
    this.#pieces.push(piece);
  }

  /** The partial event with `last`, its end: one string. */
  #take(last: string): string {
    const bytes = this.#pendingBytes + Buffer.byteLength(last);
    if (bytes > this.#maxEventBytes) throw errors.upstreamAnswerTooLarge(this.#maxEventBytes);
    const event = this.#pieces.length === 0 ? last : this.#pieces.join('') + last;
    this.#pieces = [];
    this.#pendingBytes = 0;
    return event;
  }
}

/** The fields of one event a format reads: its `event:` name and its `data:` (lines joined with \n). */
export interface EventFields {
  name: string | undefined;
  data: string | undefined;
}

// Most upstreams end their lines in \n alone: a plain split then.
const linesOf = (event: string) => (event.includes('\r') ? event.split(LINE_END) : event.split('\n'));

const fieldValue = (line: string, field: string) => line.slice(line.charCodeAt(field.length) === 0x20 ? field.length + 1 : field.length);

export function eventFields(event: string): EventFields {
  let name: string | undefined;
  let data: string | undefined;
  for (const line of linesOf(event)) {
    if (line.startsWith('data:')) {
      const value = fieldValue(line, 'data:');
      data = data === undefined ? value : `${data}\n${value}`;
    } else if (line.startsWith('event:')) {
      name = fieldValue(line, 'event:');
    }
  }
  return { name, data };
}

/** `event` with its data replaced by `data` (one line, as JSON is): its other fields kept, in order. */
export function withData(event: string, data: string): string {
  const kept = linesOf(event).filter((line) => line !== '' && !line.startsWith('data:'));
  kept.push(`data: ${data}`);
  return `${kept.join('\n')}\n\n`;
}
