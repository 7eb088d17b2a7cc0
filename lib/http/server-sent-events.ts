import { StringDecoder } from 'node:string_decoder';

// A blank line ends an event; a line ends in \r\n, \n or a lone \r.
const EVENT_END = /(?:\r\n|\r(?!\n)|\n){2}/g;
const LINE_END = /\r\n|\r|\n/;
const CR = 0x0d;

/**
 * Cuts an upstream's event-stream bytes into whole events, each with the blank line that ends it,
 * passed on as soon as it is complete. Holding back only a partial event means an error event
 * written after a failure never lands in the middle of one. Synchronous, one call per chunk.
 * @example const splitter = new EventSplitter(); for (const event of splitter.push(chunk)) res.write(event)
 */
export class EventSplitter {
  readonly #decoder = new StringDecoder('utf8');
  #pending = '';

  /** The events that `chunk` completes, in order. */
  push(chunk: Buffer | string): string[] {
    const text = this.#pending + (typeof chunk === 'string' ? chunk : this.#decoder.write(chunk));
    return this.#cut(text, false);
  }

  /** The events of what is left when the upstream ends normally: what follows the last blank line is one more. */
  end(): string[] {
    const text = this.#pending + this.#decoder.end();
    const events = this.#cut(text, true);
    if (this.#pending !== '') events.push(this.#pending);
    this.#pending = '';
    return events;
  }

  #cut(text: string, final: boolean): string[] {
    const events: string[] = [];
    let start = 0;
    EVENT_END.lastIndex = 0;
    for (let match = EVENT_END.exec(text); match !== null; match = EVENT_END.exec(text)) {
      const end = match.index + match[0].length;
      // A \r last may be the first half of a \r\n still on its way.
      if (!final && end === text.length && text.charCodeAt(end - 1) === CR) break;
      events.push(text.slice(start, end));
      start = end;
    }
    this.#pending = start === 0 ? text : text.slice(start);
    return events;
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
