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
  close(): Promise<void>;
}

/** A TCP proxy to `target` that a test can cut and restore, to take a backing service away from a server. */
export async function tcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection(target);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const cut = async () => {
    for (const socket of sockets) socket.destroy();
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
    close: cut,
  };
}
