import { isObject, type JsonObject } from '../../content.js';

/**
 * The Responses body with every content part of its `input` items passed through `map`: a
 * message's `content` and a tool output's `output`, when they are arrays (a string `input` or
 * content has no parts). The input is left as it was.
 */
export function mapResponsesContentParts(body: JsonObject, map: (part: unknown) => unknown): JsonObject {
  if (!Array.isArray(body.input)) return body;
  const input = body.input.map((item: unknown) => {
    if (!isObject(item)) return item;
    if (Array.isArray(item.content)) return { ...item, content: item.content.map(map) };
    if (Array.isArray(item.output)) return { ...item, output: item.output.map(map) };
    return item;
  });
  return { ...body, input };
}
