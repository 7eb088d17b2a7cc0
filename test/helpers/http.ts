import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import type Koa from 'koa';

export interface Listening {
  url: string;
  close(): Promise<void>;
}

/**
 * Serves `app` (a Koa app, or a server already made around one) on a random loopback port, or on
 * `port`. Its idle connections stay open until the client closes them (`keepIdle()`).
 */
export async function listen(app: Koa | Server, port = 0): Promise<Listening> {
  const server = keepIdle(app.listen(port, '127.0.0.1'));
  await once(server, 'listening');
  const { port: listening } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${listening}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * `server` without its keep-alive timeout (Node's 5 s): a client reusing an idle connection as the
 * server closes it fails with "other side closed", and on a loaded machine the server's timer can
 * fire before the request already sent on it is read. The client (undici: 4 s) closes them instead.
 */
export function keepIdle<S extends Server>(server: S): S {
  server.keepAliveTimeout = 0;
  return server;
}

/**
 * Both ends of a loopback TCP connection, destroyed when the test ends: what one end writes is in
 * the other's socket at once, read when the event loop next polls.
 */
export async function loopbackPair(t: { teardown(fn: () => unknown): void }): Promise<[near: Socket, far: Socket]> {
  const listener = createNetServer().listen(0, '127.0.0.1');
  await once(listener, 'listening');
  const far = connect((listener.address() as AddressInfo).port, '127.0.0.1');
  const [[near]] = await Promise.all([once(listener, 'connection') as Promise<[Socket]>, once(far, 'connect')]);
  t.teardown(() => {
    far.destroy();
    near.destroy();
    listener.close();
  });
  return [near, far];
}

/** A loopback port free a moment ago: for a server whose address must be known before it starts (its PUBLIC_URL). */
export async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
