import { isObject, type JsonObject } from '../http/json-body.js';

export { isObject, type JsonObject };

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

/**
 * The Messages body with every content block passed through `map`: the messages' blocks, those
 * inside a `tool_result`, where documents may appear too, and those of `system` when it is a list.
 * The input is left as it was.
 */
export function mapMessagesContentBlocks(body: JsonObject, map: (block: unknown) => unknown): JsonObject {
  const mapBlock = (block: unknown): unknown =>
    isObject(block) && block.type === 'tool_result' && Array.isArray(block.content) ? { ...block, content: block.content.map(mapBlock) } : map(block);
  // Both formats keep a message's blocks in `messages[].content`.
  const mapped = mapChatContentParts(body, mapBlock);
  // A block of `system` names files as any other: none may reach the upstream unchecked.
  return Array.isArray(body.system) ? { ...mapped, system: body.system.map(mapBlock) } : mapped;
}

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
