import { isObject, type JsonObject } from '../../content.js';
import { mapChatContentParts } from '../../formats/chat-completions/content.js';
import { mapMessagesContentBlocks } from '../../formats/messages/content.js';
import { mapResponsesContentParts } from '../../formats/responses/content.js';
import { chatToolResult, messagesToolResult, responsesToolResult } from './tools.js';

// What the echo provider reads from a request of either format, and the answer it gives about it.

/** A document as the echo provider saw it. */
interface ReceivedDocument {
  name: string;
  bytes: number;
  pages: number;
}

export interface Received {
  model: string;
  messageCount: number;
  lastUserText: string;
  /** The text of the tool result the request ends with, if it ends with one. */
  toolResultText: string | undefined;
  documents: ReceivedDocument[];
}

/**
 * The number of page objects (`/Type /Page`, not `/Pages`) in a PDF. Enough to describe a
 * document; pages hidden inside compressed object streams are not seen.
 * @example countPdfPages(await readFile('report.pdf'))
 */
export function countPdfPages(pdf: Buffer): number {
  return pdf.toString('latin1').match(/\/Type\s*\/Page(?![A-Za-z])/g)?.length ?? 0;
}

function describeDocument(name: string, base64: string): ReceivedDocument {
  const bytes = Buffer.from(base64, 'base64');
  return { name, bytes: bytes.length, pages: countPdfPages(bytes) };
}

/** The base64 of a `data:` URL, as Chat Completions and Responses carry a file. */
const dataUrlBase64 = (url: string) => url.slice(url.indexOf(',') + 1);

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? '' : 's'}`;
export const words = (text: string) => text.split(/\s+/).filter(Boolean).length;
export const inputWords = (messages: unknown[]) => messages.reduce<number>((sum, message) => sum + (isObject(message) ? words(textOf(message.content)) : 0), 0);

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (
    content
      // `text` in Chat Completions and Messages, `input_text` in Responses.
      .filter((part): part is JsonObject => isObject(part) && (part.type === 'text' || part.type === 'input_text') && typeof part.text === 'string')
      .map((part) => part.text)
      .join('\n')
  );
}

const resultText = (content: unknown) => (content === undefined ? undefined : textOf(content));

function lastUserText(messages: unknown[]): string {
  const last = messages.findLast((message) => isObject(message) && message.role === 'user');
  return isObject(last) ? textOf(last.content) : '';
}

/** What a Chat Completions body holds; attached PDFs are `file` parts with a data URL. */
export function receivedChat(body: JsonObject, messages: unknown[]): Received {
  const documents: ReceivedDocument[] = [];
  mapChatContentParts(body, (part) => {
    if (isObject(part) && part.type === 'file' && isObject(part.file) && typeof part.file.file_data === 'string') {
      const name = typeof part.file.filename === 'string' ? part.file.filename : 'unnamed';
      documents.push(describeDocument(name, dataUrlBase64(part.file.file_data)));
    }
    return part;
  });
  return {
    model: String(body.model),
    messageCount: messages.length,
    lastUserText: lastUserText(messages),
    toolResultText: resultText(chatToolResult(messages)),
    documents,
  };
}

/** What a Messages body holds; attached PDFs are `document` blocks with a base64 source. */
export function receivedMessages(body: JsonObject, messages: unknown[]): Received {
  const documents: ReceivedDocument[] = [];
  mapMessagesContentBlocks(body, (block) => {
    if (isObject(block) && block.type === 'document' && isObject(block.source) && block.source.type === 'base64') {
      const name = typeof block.title === 'string' ? block.title : 'untitled';
      documents.push(describeDocument(name, String(block.source.data)));
    }
    return block;
  });
  return {
    model: String(body.model),
    messageCount: messages.length,
    lastUserText: lastUserText(messages),
    toolResultText: resultText(messagesToolResult(messages)),
    documents,
  };
}

/** The messages of a Responses `input`: a string is one user message; of a list, the items with a role. */
export function responsesMessages(input: unknown): unknown[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  return Array.isArray(input) ? input.filter((item) => isObject(item) && typeof item.role === 'string') : [];
}

/** What a Responses body holds; attached PDFs are `input_file` parts with a data URL. */
export function receivedResponses(body: JsonObject): Received {
  const documents: ReceivedDocument[] = [];
  mapResponsesContentParts(body, (part) => {
    if (isObject(part) && part.type === 'input_file' && typeof part.file_data === 'string') {
      const name = typeof part.filename === 'string' ? part.filename : 'unnamed';
      documents.push(describeDocument(name, dataUrlBase64(part.file_data)));
    }
    return part;
  });
  const messages = responsesMessages(body.input);
  return {
    model: String(body.model),
    messageCount: messages.length,
    lastUserText: lastUserText(messages),
    toolResultText: resultText(responsesToolResult(body.input)),
    documents,
  };
}

/** The answer, one line per fact, so that it streams as several deltas. */
export function answerLines(received: Received): string[] {
  const lines = [`Echo from ${received.model}: received ${plural(received.messageCount, 'message')}.`];
  lines.push(received.lastUserText === '' ? 'The last user message has no text.' : `The last user message says: ${JSON.stringify(received.lastUserText)}`);
  if (received.toolResultText !== undefined) {
    lines.push(received.toolResultText === '' ? 'The tool result has no text.' : `The tool result says: ${JSON.stringify(received.toolResultText)}`);
  }
  if (received.documents.length === 0) lines.push('No documents are attached.');
  received.documents.forEach((document, index) => {
    lines.push(`Document ${index + 1}: ${document.name}, ${plural(document.bytes, 'byte')}, ${plural(document.pages, 'page')}.`);
  });
  return lines.map((line, index) => (index < lines.length - 1 ? `${line}\n` : line));
}
