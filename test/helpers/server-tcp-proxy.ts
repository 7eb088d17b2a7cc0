import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';

export interface TcpProxy {
  /** host:port of the proxy. */
  address: string;
  port: number;
  /** Stops listening and cuts every connection: the service looks down. */
  cut(): Promise<void>;
  /** Listens again on the same port: the service is back. */
  restore(): Promise<void>;
  /** Forwards nothing more either way, and accepts connections without forwarding them: the service hangs. */
  stall(): void;
  /** Forwards again what was held, and everything after. */
  resume(): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
}

const forward = ({ client, upstream }: Pair) => client.pipe(upstream).pipe(client);

function hold({ client, upstream }: Pair): void {
  client.unpipe(upstream);
  upstream.unpipe(client);
  client.pause();
  upstream.pause();
}

/** A TCP proxy to `target` that a test can cut, stall and restore, to take a backing service away from a server. */
export async function tcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let stalled = false;
  const server = createServer((client) => {
    const pair = { client, upstream: createConnection(target) };
    pairs.add(pair);
    for (const socket of [pair.client, pair.upstream]) {
      socket.on('error', () => undefined);
      // One side gone: the other goes too, as it would without the proxy.
      socket.once('close', () => {
        pairs.delete(pair);
        pair.client.destroy();
        pair.upstream.destroy();
      });
    }
    if (stalled) hold(pair);
    else forward(pair);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const cut = async () => {
    for (const { client, upstream } of pairs) {
      client.destroy();
      upstream.destroy();
    }
    if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return {
    address: `127.0.0.1:${port}`,
    port,
    cut,
    async restore() {
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    stall() {
      stalled = true;
      for (const pair of pairs) hold(pair);
    },
    resume() {
      stalled = false;
      for (const pair of pairs) forward(pair);
    },
    close: cut,
  };
}
