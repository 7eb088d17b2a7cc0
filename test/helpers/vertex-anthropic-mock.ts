import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { listen } from './http.js';

// A mock of Claude on Vertex AI, built from its published reference (Google Cloud's "Use Claude
// models" pages and Anthropic's "Claude on Vertex AI"), not from the gateway's writer: the
// publisher path `.../publishers/anthropic/models/{model}:rawPredict` (`:streamRawPredict` for a
// stream, `count-tokens:rawPredict` for a count), a bearer token, a Messages body without `model`
// (count-tokens: with it) and with `anthropic_version: "vertex-2023-10-16"`; it answers what a test
// scripts, in Anthropic's Messages format, and refuses as Vertex AI does otherwise.

export const MOCK_PROJECT = 'my-project';
export const MOCK_LOCATION = 'us-east5';
export const MOCK_TOKEN = 'ya29.vertex-access-token';
const MODELS = `/v1/projects/${MOCK_PROJECT}/locations/${MOCK_LOCATION}/publishers/anthropic/models/`;

/** A call the mock accepted. */
export interface VertexCall {
  /** The model named in the path (`count-tokens` for a count). */
  model: string;
  method: 'rawPredict' | 'streamRawPredict';
  path: string;
  headers: IncomingHttpHeaders;
  // biome-ignore lint/suspicious/noExplicitAny: the wire's JSON, read field by field
  body: Record<string, any>;
}

/** How the mock answers one call: JSON (status 200 unless given), or server-sent events as they are written. */
export type VertexReply = { status?: number; json: unknown } | { events: string[] };

/** One server-sent event of Anthropic's stream: its name and its data. */
export const sse = (data: Record<string, unknown>) => `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`;

/** An error in Google's shape, as Vertex AI itself refuses (authentication, quota). */
export const googleError = (code: number, status: string, message: string) => ({ error: { code, message, status } });

/** An error in Anthropic's shape, as the model's own API behind Vertex AI refuses. */
export const anthropicError = (type: string, message: string) => ({ type: 'error', error: { type, message } });

export async function vertexAnthropicMock() {
  const calls: VertexCall[] = [];
  let reply: (call: VertexCall) => VertexReply = () => ({ status: 500, json: googleError(500, 'INTERNAL', 'nothing scripted') });
  const send = (res: ServerResponse, status: number, json: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '';
      const match = /^([^:]+):(rawPredict|streamRawPredict)$/.exec(path.startsWith(MODELS) ? path.slice(MODELS.length) : '');
      if (req.method !== 'POST' || !match) return send(res, 404, googleError(404, 'NOT_FOUND', 'The requested URL was not found'));
      if (req.headers.authorization !== `Bearer ${MOCK_TOKEN}`)
        return send(res, 401, googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.'));
      const call: VertexCall = {
        model: decodeURIComponent(match[1] as string),
        method: match[2] as VertexCall['method'],
        path,
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
      };
      const counting = call.model === 'count-tokens';
      if (call.body.anthropic_version !== 'vertex-2023-10-16')
        return send(res, 400, anthropicError('invalid_request_error', 'anthropic_version: vertex-2023-10-16 is required'));
      if (!counting && 'model' in call.body) return send(res, 400, anthropicError('invalid_request_error', 'model: Extra inputs are not permitted'));
      if (counting && typeof call.body.model !== 'string') return send(res, 400, anthropicError('invalid_request_error', 'model: Field required'));
      if ((call.method === 'streamRawPredict') !== (call.body.stream === true))
        return send(res, 400, googleError(400, 'FAILED_PRECONDITION', 'Stream must be set to true for streamRawPredict, false for rawPredict'));
      calls.push(call);
      const answer = reply(call);
      if ('json' in answer) return send(res, answer.status ?? 200, answer.json);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const event of answer.events) res.write(event);
      res.end();
    });
  });
  const { url, close } = await listen(server);
  return {
    url,
    calls,
    /** Answers every call from now on with `script`. */
    script(script: typeof reply) {
      reply = script;
    },
    close,
  };
}
