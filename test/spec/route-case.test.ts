import test from 'ava';
import { referenceApp } from './reference-app.js';

// The reference server decides by exact path whether a request is under /v1 (authenticated first)
// and whether it is under /v1/messages (Shape B), so its routers must match exactly too: a router
// that took /V1/files or /v1/Messages as its route let such requests skip authentication (a 500)
// or reach Messages in Shape A.
const app = await referenceApp();
test.after.always(() => app.close());

const unknownUrl = (method: string, path: string) => ({
  error: { message: `Unknown request URL: ${method} ${path}`, type: 'invalid_request_error', param: null, code: 'unknown_url' },
});

for (const [method, path] of [['GET', '/V1/models'], ['GET', '/V1/files'], ['POST', '/V1/chat/completions'], ['POST', '/V1/messages'], ['GET', '/HEALTHZ']] as const) {
  test(`${method} ${path} is an unknown URL, never a route that skipped authentication`, async (t) => {
    const response = await fetch(`${app.url}${path}`, { method });
    t.deepEqual({ status: response.status, body: await response.json() }, { status: 404, body: unknownUrl(method, path) });
  });
}

test('under /v1 the key comes first; a path that differs by case is no route', async (t) => {
  const response = await fetch(`${app.url}/v1/Messages`, { method: 'POST', headers: { 'x-api-key': await app.keyFor() }, body: '{}' });
  t.deepEqual({ status: response.status, body: await response.json() }, { status: 404, body: unknownUrl('POST', '/v1/Messages') });
  t.false(app.logs.some((line) => line.level >= 50), 'no error-level log line');
});

test('GET /v1/messages is a 405 in Shape B with request-id: every /v1/messages response carries one', async (t) => {
  const response = await fetch(`${app.url}/v1/messages`, { headers: { 'x-api-key': await app.keyFor() } });
  const body = (await response.json()) as { type?: string; error?: { type?: string }; request_id?: string };
  t.is(response.status, 405);
  t.is(body.type, 'error');
  t.is(body.error?.type, 'invalid_request_error');
  t.regex(body.request_id ?? '', /^req_[A-Za-z0-9]{32}$/);
  t.is(response.headers.get('request-id'), body.request_id ?? null);
  t.regex(response.headers.get('allow') ?? '', /POST/);
});
