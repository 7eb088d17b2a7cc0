import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Sha256 } from '@aws-crypto/sha256-js';
import { EventStreamCodec } from '@smithy/core/event-streams';
import { SignatureV4 } from '@smithy/signature-v4';
import { keepIdle } from './http.js';

// A mock of Amazon Bedrock's Runtime API, built from its published reference (the Converse,
// ConverseStream and InvokeModel pages of the Bedrock API Reference), not from the gateway's
// writer: it answers what a test scripts, JSON or the binary EventStream framing
// (application/vnd.amazon.eventstream, encoded by AWS's own codec), and refuses as Bedrock does
// a call whose SigV4 signature is not that of the test's credentials.

export const MOCK_REGION = 'us-east-1';
export const MOCK_CREDENTIALS = { accessKeyId: 'AKIDEXAMPLEBEDROCK', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' } as const;

/** One call as the mock received it. */
export interface BedrockCall {
  /** `converse`, `converse-stream` or `invoke`. */
  operation: string;
  /** The model id, decoded from the path. */
  model: string;
  /** The raw path, as sent. */
  path: string;
  headers: IncomingMessage['headers'];
  // biome-ignore lint/suspicious/noExplicitAny: the wire's JSON, read field by field
  body: Record<string, any>;
}

/** One message of a scripted ConverseStream answer: an event, or an exception. */
export type StreamMessage = { event: string; payload: Record<string, unknown> } | { exception: string; message: string };

/** What the mock answers one call with. */
export type BedrockReply =
  | { status?: number; json: unknown; headers?: Record<string, string> }
  | {
      stream: StreamMessage[];
      /** Held back until this resolves: the message at `at` and those after it. */
      hold?: { at: number; until: Promise<unknown> };
    };

const codec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes).toString('utf8'),
  (text) => Buffer.from(text, 'utf8'),
);

/** One EventStream message, as Bedrock frames it. */
export function frame(message: StreamMessage): Uint8Array {
  const str = (value: string) => ({ type: 'string' as const, value });
  if ('exception' in message) {
    return codec.encode({
      headers: { ':message-type': str('exception'), ':exception-type': str(message.exception), ':content-type': str('application/json') },
      body: Buffer.from(JSON.stringify({ message: message.message })),
    });
  }
  return codec.encode({
    headers: { ':message-type': str('event'), ':event-type': str(message.event), ':content-type': str('application/json') },
    // Bedrock pads each event's payload with a `p` field of random length.
    body: Buffer.from(JSON.stringify({ ...message.payload, p: 'abcdefghijklmnop'.slice(0, 1 + (JSON.stringify(message.payload).length % 16)) })),
  });
}

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([a-z0-9-]+)\/bedrock\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/;

/** Whether `request` (its raw body `body`) carries the SigV4 signature of MOCK_CREDENTIALS: signed again by AWS's signer and compared. */
async function signatureHolds(request: IncomingMessage, body: string): Promise<boolean> {
  const match = AUTHORIZATION.exec(request.headers.authorization ?? '');
  const date = request.headers['x-amz-date'];
  if (!match || typeof date !== 'string' || match[1] !== MOCK_CREDENTIALS.accessKeyId || match[3] !== MOCK_REGION) return false;
  const signedHeaders = (match[4] as string).split(';');
  const headers = Object.fromEntries(signedHeaders.map((name) => [name, String(request.headers[name] ?? '')]));
  const signingDate = new Date(date.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
  const signer = new SignatureV4({ service: 'bedrock', region: MOCK_REGION, credentials: MOCK_CREDENTIALS, sha256: Sha256 });
  const url = new URL(request.url ?? '/', `http://${request.headers.host}`);
  const signed = await signer.sign(
    { method: 'POST', protocol: 'http:', hostname: url.hostname, port: Number(url.port), path: url.pathname, query: {}, headers, body },
    { signingDate },
  );
  return String(signed.headers.authorization).endsWith(`Signature=${match[5]}`);
}

function error(response: ServerResponse, status: number, type: string, message: string): void {
  response.writeHead(status, { 'content-type': 'application/json', 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` });
  response.end(JSON.stringify({ message }));
}

/**
 * A mock Bedrock Runtime on a random loopback port: each call is recorded in `calls` and answered
 * by `reply(call)` (default: a 500 saying nothing is scripted).
 */
export async function bedrockMock() {
  const calls: BedrockCall[] = [];
  /** How many answers were closed by the caller before their end. */
  const closed = { count: 0 };
  let reply: (call: BedrockCall) => BedrockReply | Promise<BedrockReply> = () => ({ status: 500, json: { message: 'nothing scripted' } });
  const server = createServer((request, response) => {
    response.on('close', () => {
      if (!response.writableEnded) closed.count++;
    });
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      void (async () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const path = (request.url ?? '').split('?')[0] as string;
        const match = /^\/model\/([^/]+)\/(converse|converse-stream|invoke)$/.exec(path);
        if (request.method !== 'POST' || !match) return error(response, 404, 'UnknownOperationException', 'Unknown operation');
        if (!(await signatureHolds(request, raw)))
          return error(
            response,
            403,
            'InvalidSignatureException',
            'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.',
          );
        const call: BedrockCall = {
          operation: match[2] as string,
          model: decodeURIComponent(match[1] as string),
          path,
          headers: request.headers,
          body: JSON.parse(raw),
        };
        calls.push(call);
        const answer = await reply(call);
        if ('json' in answer) {
          response.writeHead(answer.status ?? 200, { 'content-type': 'application/json', 'x-amzn-requestid': `req-${calls.length}`, ...answer.headers });
          return response.end(JSON.stringify(answer.json));
        }
        response.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': `req-${calls.length}` });
        for (const [at, message] of answer.stream.entries()) {
          if (answer.hold?.at === at) await answer.hold.until;
          if (response.destroyed) return;
          response.write(frame(message));
        }
        response.end();
      })().catch((err: unknown) => response.destroy(err as Error));
    });
  });
  keepIdle(server).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    closed,
    /** Answers every call from now on with `script`. */
    script(script: typeof reply) {
      reply = script;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A Converse answer, as the API Reference shows one: the assistant's content, a stop reason, usage and metrics. */
export function converseAnswer(content: unknown[], stopReason = 'end_turn', usage: Record<string, number> = { inputTokens: 12, outputTokens: 5 }) {
  return {
    output: { message: { role: 'assistant', content } },
    stopReason,
    usage: { ...usage, totalTokens: (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0) },
    metrics: { latencyMs: 321 },
  };
}

/** A ConverseStream answer of text pieces, as Bedrock streams one for Claude: no contentBlockStart for text. */
export function textStream(pieces: string[], usage: Record<string, number> = { inputTokens: 12, outputTokens: 5 }, stopReason = 'end_turn'): StreamMessage[] {
  return [
    { event: 'messageStart', payload: { role: 'assistant' } },
    ...pieces.map((text) => ({ event: 'contentBlockDelta', payload: { contentBlockIndex: 0, delta: { text } } })),
    { event: 'contentBlockStop', payload: { contentBlockIndex: 0 } },
    { event: 'messageStop', payload: { stopReason } },
    { event: 'metadata', payload: { usage: { ...usage, totalTokens: (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0) }, metrics: { latencyMs: 400 } } },
  ];
}
