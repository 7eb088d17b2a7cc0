import { isObject, type JsonObject } from '../../content.js';

/**
 * The Chat Completions body with every content part of every message passed through `map`
 * (string contents have no parts). The input is left as it was.
 */
export function mapChatContentParts(body: JsonObject, map: (part: unknown) => unknown): JsonObject {
  if (!Array.isArray(body.messages)) return body;
  const messages = body.messages.map((message: unknown) =>
    isObject(message) && Array.isArray(message.content) ? { ...message, content: message.content.map(map) } : message,
  );
  return { ...body, messages };
}
