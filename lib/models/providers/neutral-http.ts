import { eventObject, unreadableStreamEvent } from '../answer.js';
import type { JsonObject } from '../content.js';
import { EventSplitter, eventFields } from '../../http/server-sent-events.js';
import type { ProviderAnswer } from '../provider.js';
import { discard, readWhole } from '../upstream-call.js';

// Reading an upstream's HTTP answers for a provider of the neutral representation: JSON whole and
// server-sent events one by one, each bounded, and an error answer handed to the provider's own reader.

/** The most of an error answer's body read: its message is in the first bytes. */
const MAX_ERROR_BYTES = 64 * 1024;

/** Turns an upstream's error answer (its status, body text and headers) into the error thrown: an `UpstreamStatusError`. */
export type ErrorReader = (status: number, text: string, answer: ProviderAnswer) => Error;

/** Throws `errorOf`'s error for an answer whose status is not 2xx, its body read (at most 64 KiB). */
export async function refuseFailure(answer: ProviderAnswer, errorOf: ErrorReader): Promise<void> {
  if (answer.statusCode >= 200 && answer.statusCode <= 299) return;
  let text = '';
  try {
    text = await readWhole(answer.body, MAX_ERROR_BYTES, undefined);
  } catch {
    // Too long, or cut: the status alone tells.
    discard(answer.body);
  }
  throw errorOf(answer.statusCode, text, answer);
}

/** A 2xx answer's JSON object, read whole (at most `maxBytes`: past them a 502); anything else fails the call. */
export async function upstreamJson(answer: ProviderAnswer, maxBytes: number, errorOf: ErrorReader): Promise<JsonObject> {
  await refuseFailure(answer, errorOf);
  const parsed = eventObject(await readWhole(answer.body, maxBytes, undefined));
  if (parsed === undefined) throw unreadableStreamEvent('an answer that is not a JSON object');
  return parsed;
}

/**
 * The data of a 2xx answer's server-sent events, each parsed as a JSON object, as they arrive (an
 * event of more than `maxBytes` is a 502). Stopping the iteration destroys the body, which ends the
 * upstream call.
 */
export async function* upstreamEvents(answer: ProviderAnswer, maxBytes: number, errorOf: ErrorReader): AsyncGenerator<JsonObject> {
  await refuseFailure(answer, errorOf);
  const splitter = new EventSplitter({ maxEventBytes: maxBytes });
  const parse = (event: string) => {
    const { data } = eventFields(event);
    if (data === undefined) return undefined;
    const parsed = eventObject(data);
    if (parsed === undefined) throw unreadableStreamEvent('an event whose data is not a JSON object');
    return parsed;
  };
  try {
    for await (const chunk of answer.body as AsyncIterable<Buffer | string>) {
      for (const event of splitter.push(chunk)) {
        const parsed = parse(event);
        if (parsed !== undefined) yield parsed;
      }
    }
    for (const event of splitter.end()) {
      const parsed = parse(event);
      if (parsed !== undefined) yield parsed;
    }
  } finally {
    if (!answer.body.readableEnded) discard(answer.body);
  }
}
