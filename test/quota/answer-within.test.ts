import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import test from 'ava';
import { StoreUnavailableError } from '../../lib/errors/gateway-error.js';
import { answerWithin } from '../../lib/stores/redis/redis-limiter.js';

/** Both ends of a loopback TCP connection. */
async function socketPair(): Promise<{ client: Socket; server: Socket; close(): void }> {
  const listener = createServer().listen(0, '127.0.0.1');
  await once(listener, 'listening');
  const client = connect((listener.address() as AddressInfo).port, '127.0.0.1');
  const [[server]] = await Promise.all([once(listener, 'connection') as Promise<[Socket]>, once(client, 'connect')]);
  return {
    client,
    server,
    close() {
      client.destroy();
      server.destroy();
      listener.close();
    },
  };
}

const block = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until);
};

// A starved process runs its expired timers before it reads its sockets: an answer that arrived
// during the stall is still taken, not refused by a timer that only fired late.
test('an answer that arrived while the event loop was stalled past the timeout is taken', async (t) => {
  const { client, server, close } = await socketPair();
  t.teardown(close);
  const answered = answerWithin(once(client, 'data').then(([chunk]) => String(chunk)), 20);
  server.write('PONG');
  block(100);
  t.is(await answered, 'PONG');
});

test('no answer within the timeout is StoreUnavailableError', async (t) => {
  const { client, close } = await socketPair();
  t.teardown(close);
  const error = await t.throwsAsync(answerWithin(once(client, 'data'), 20), { instanceOf: StoreUnavailableError });
  t.regex(String(error?.message), /did not answer within 20 ms/);
});
