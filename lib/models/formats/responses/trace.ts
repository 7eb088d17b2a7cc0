import { isObject, type JsonObject } from '../../content.js';
import type { AnswerTrace, TracedAnswer } from '../format.js';
import { readResponsesUsage } from './answer.js';

/** A response object; `final` once it has ended, when it has its usage and status. */
function response(body: JsonObject, into: TracedAnswer, final: boolean, streamed: boolean): void {
  into.ids(body.id, body.model);
  if (!final) return;
  if (isObject(body.usage)) into.usage(readResponsesUsage(body.usage));
  const incomplete = isObject(body.incomplete_details) ? body.incomplete_details.reason : undefined;
  into.finish(typeof incomplete === 'string' && incomplete !== '' ? incomplete : body.status, 0);
  // A stream's text came in its deltas.
  if (streamed || !Array.isArray(body.output)) return;
  for (const item of body.output) {
    if (!isObject(item) || !Array.isArray(item.content)) continue;
    for (const part of item.content) if (isObject(part) && part.type === 'output_text') into.text(0, part.text);
  }
}

/** What a trace records of a Responses answer: the response object's status and output text; a stream's text from its deltas. */
export const responsesTrace: AnswerTrace = {
  parameters: {
    max_output_tokens: 'gen_ai.request.max_tokens',
    temperature: 'gen_ai.request.temperature',
    top_p: 'gen_ai.request.top_p',
  },
  json: (body, into) => response(body, into, true, false),
  event(data, into) {
    switch (data.type) {
      case 'response.output_text.delta':
        into.text(0, data.delta);
        return;
      case 'response.created':
      case 'response.completed':
      case 'response.incomplete':
      case 'response.failed':
        if (isObject(data.response)) response(data.response, into, data.type !== 'response.created', true);
        return;
      default:
    }
  },
};
