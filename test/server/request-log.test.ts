import { connect } from 'node:net';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { serverWithKey, uploadFiles, type LogLine } from '../helpers/server-process.js';

const until = async (condition: () => boolean | Promise<boolean>) => {
  for (let waited = 0; !(await condition()) && waited < 10_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
};

test('an upload the client abandons is logged as a 499 request, not as a server failure, and leaves nothing', async (t) => {
  const { env, key, server } = await serverWithKey(t, 'acme');
  const { port } = new URL(server.url);

  const socket = connect(Number(port), '127.0.0.1');
  const boundary = 'b0undary';
  socket.write(
    `POST /v1/files HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\n` +
      `Content-Length: 1000000\r\n\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.pdf"\r\n` +
      `Content-Type: application/pdf\r\n\r\n%PDF-1.4 ${'x'.repeat(50_000)}`,
  );
  // Gone once the server is streaming the file part to its temp file.
  await until(async () => (await uploadFiles(env.DATA_DIR)).length > 0);
  socket.destroy();

  const isUpload = (line: LogLine) => line.msg === 'request' && line.path === '/v1/files';
  await until(() => server.logs.some(isUpload));
  t.like(server.logs.find(isUpload), { status: 499, aborted: true, account: 'acme' });
  t.deepEqual(server.logs.filter((line) => (line.level as number) >= 50), [], 'no error-level line');
  t.deepEqual(await uploadFiles(env.DATA_DIR), []);
  t.deepEqual(await readdir(join(env.DATA_DIR, 'files')), []);
});
