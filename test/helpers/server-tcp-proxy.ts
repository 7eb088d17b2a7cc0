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
  /**
   * Reads and discards every byte either way, on the connections open now and on those accepted
   * while it lasts: a network that loses what it carries. A close still goes through.
   */
  drop(): void;
  /** Forwards again what was held, and everything after; connections that lost bytes are cut (their streams are broken). */
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

const discard = () => undefined;

function lose(pair: Pair): void {
  hold(pair);
  pair.client.on('data', discard).resume();
  pair.upstream.on('data', discard).resume();
}

/** A TCP proxy to `target` that a test can cut, stall and restore, to take a backing service away from a server. */
export async function tcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  const lossy = new Set<Pair>();
  let mode: 'forward' | 'stall' | 'drop' = 'forward';
  const server = createServer((client) => {
    const pair = { client, upstream: createConnection(target) };
    pairs.add(pair);
    for (const socket of [pair.client, pair.upstream]) {
      socket.on('error', () => undefined);
      // One side gone: the other goes too, as it would without the proxy.
      socket.once('close', () => {
        pairs.delete(pair);
        lossy.delete(pair);
        pair.client.destroy();
        pair.upstream.destroy();
      });
    }
    if (mode === 'stall') hold(pair);
    else if (mode === 'drop') {
      lose(pair);
      lossy.add(pair);
    } else forward(pair);
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
      mode = 'stall';
      for (const pair of pairs) hold(pair);
    },
    drop() {
      mode = 'drop';
      for (const pair of pairs) {
        lose(pair);
        lossy.add(pair);
      }
    },
    resume() {
      mode = 'forward';
      for (const pair of pairs) {
        if (lossy.has(pair)) {
          pair.client.destroy();
          pair.upstream.destroy();
        } else forward(pair);
      }
    },
    close: cut,
  };
}
