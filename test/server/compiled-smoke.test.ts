import test from 'ava';
import { makePdf } from '../helpers/models-pdf.js';
import { uploadForm } from '../helpers/multipart.js';
import { spawnCli, spawnServer, tempDataDir, type CreatedKey } from '../helpers/server-process.js';

// The package as it ships: the compiled CLI makes a key and serves the API in processes of their
// own. The API's rules are tested on servers in the tests' process; this checks that the build
// runs them.

test('the compiled CLI makes a key, serves files, models and the dashboard with it, and stops on SIGTERM with exit code 0', async (t) => {
  const data = await tempDataDir();
  t.teardown(() => data.remove());
  const env = { DATA_DIR: data.dir };
  const created = await spawnCli(['keys', 'create', '--account', 'acme', '--json'], env);
  t.is(created.code, 0, created.stderr);
  const { key } = JSON.parse(created.stdout) as CreatedKey;
  const server = await spawnServer(env);
  t.teardown(() => server.stop());
  const auth = { authorization: `Bearer ${key}` };

  const pdf = makePdf(1);
  const uploaded = await fetch(`${server.url}/v1/files`, { method: 'POST', headers: auth, body: uploadForm(pdf) });
  t.is(uploaded.status, 200);
  const { id } = (await uploaded.json()) as { id: string };
  const content = await fetch(`${server.url}/v1/files/${id}/content`, { headers: auth });
  t.deepEqual(Buffer.from(await content.arrayBuffer()), pdf);

  const chat = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] }),
  });
  t.is(chat.status, 200);
  t.like(await chat.json(), { object: 'chat.completion', model: 'echo-1' });

  const dashboard = await fetch(`${server.url}/dashboard`);
  t.is(dashboard.status, 200);
  t.regex(dashboard.headers.get('content-type') ?? '', /^text\/html/);
  t.like(await (await fetch(`${server.url}/openapi.json`)).json(), { openapi: '3.1.0' });

  t.is(await server.stop(), 0);
  t.truthy(server.logs.find((line) => line.msg === 'stopped'));
});
