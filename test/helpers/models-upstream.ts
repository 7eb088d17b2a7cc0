import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A complete Anthropic Messages answer saying `text`, as the upstream sends it. */
export function anthropicMessage(text: string) {
  return {
    id: 'msg_upstream',
    type: 'message',
    role: 'assistant',
    model: 'claude-sonnet-4-5-20250929',
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 4 },
  };
}

/**
 * A real upstream on a loopback port that answers every request with an event stream it never
 * ends by itself: `requests` resolves each request as it arrives, so a test can write events and
 * see when the gateway closes the connection.
 */
export async function streamingUpstream() {
  const arrivals: Array<{ req: IncomingMessage; res: ServerResponse }> = [];
  const waiting: Array<(arrival: { req: IncomingMessage; res: ServerResponse }) => void> = [];
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    const arrival = { req, res };
    const waiter = waiting.shift();
    if (waiter) waiter(arrival);
    else arrivals.push(arrival);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    /** The next request the upstream receives. */
    next: () => new Promise<{ req: IncomingMessage; res: ServerResponse }>((resolve) => {
      const arrival = arrivals.shift();
      if (arrival) resolve(arrival);
      else waiting.push(resolve);
    }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
