import test from 'ava';
import { serverWithKey } from '../helpers/server-process.js';

test('paths match exactly: /V1/... is an unknown URL, never a route that skipped authentication', async (t) => {
  const { key, server } = await serverWithKey(t, 'acme');
  for (const [method, path] of [['GET', '/V1/models'], ['GET', '/V1/files'], ['POST', '/V1/chat/completions'], ['GET', '/HEALTHZ']] as const) {
    const response = await fetch(`${server.url}${path}`, { method });
    t.deepEqual(
      { status: response.status, body: await response.json() },
      { status: 404, body: { error: { message: `Unknown request URL: ${method} ${path}`, type: 'invalid_request_error', param: null, code: 'unknown_url' } } },
      path,
    );
  }
  // Under /v1 the key comes first; a path that only differs by case or a trailing slash is no route.
  for (const path of ['/v1/Messages', '/v1/messages/']) {
    const response = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'x-api-key': key }, body: '{"model":"echo-1","max_tokens":5,"messages":[]}' });
    t.like({ status: response.status, body: await response.json() }, { status: 404, body: { error: { code: 'unknown_url' } } }, path);
  }
  t.deepEqual(server.logs.filter((line) => (line.level as number) >= 50), [], 'no error-level line');
});
