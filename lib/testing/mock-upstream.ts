import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a `mockUpstream()` received. */
export interface Arrival {
  path: string;
  headers: IncomingHttpHeaders;
  /** The request's body, as text. */
  body: string;
  /** Where the test answers. */
  res: ServerResponse;
  /** Settles when the connection of this request closes: its answer ended, or its caller went away. */
  closed: Promise<void>;
}

/** A loopback HTTP server that hands each request, its body read, to `handle`, which answers it. */
export interface MockUpstream {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** Every request so far, in order. */
  received: Arrival[];
  close(): Promise<void>;
}

export async function mockUpstream(handle: (arrival: Arrival) => void): Promise<MockUpstream> {
  const received: Arrival[] = [];
  const server = createServer((req, res) => {
    const closed = once(res, 'close').then(() => undefined);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.once('end', () => {
      const arrival = { path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), res, closed };
      received.push(arrival);
      handle(arrival);
    });
    // A caller that goes away mid-request: nothing to answer.
    req.on('error', () => undefined);
    res.on('error', () => undefined);
  });
  // Idle connections stay open until the caller closes them: a server closing one as the caller
  // reuses it fails the call, and on a loaded machine its 5 s timer can fire before a request
  // already sent on it is read.
  server.keepAliveTimeout = 0;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
