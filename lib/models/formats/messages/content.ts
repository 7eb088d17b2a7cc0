import { isObject, type JsonObject } from '../../content.js';
import { mapChatContentParts } from '../chat-completions/content.js';

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
