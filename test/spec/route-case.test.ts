import test from 'ava';
import { referenceApp } from './reference-app.js';

// The reference server decides by exact path whether a request is under /v1 (authenticated first)
// and whether it is /v1/messages (Shape B), so its routers must match exactly too: a router that
// took /V1/files or /v1/messages/ as its route let such requests skip authentication (a 500) or
// reach Messages in Shape A.
const app = await referenceApp();
test.after.always(() => app.close());

for (const [method, path] of [['GET', '/V1/files'], ['GET', '/V1/models'], ['POST', '/V1/messages'], ['POST', '/V1/chat/completions']] as const) {
  test(`${method} ${path}: authenticated like any /v1 route (or unknown), never a 500`, async (t) => {
    const anonymous = await fetch(`${app.url}${path}`, { method });
    t.true([401, 404].includes(anonymous.status), `without a key: ${anonymous.status} ${await anonymous.text()}`);
    const key = await app.keyFor();
    const keyed = await fetch(`${app.url}${path}`, { method, headers: { authorization: `Bearer ${key}` } });
    t.true(keyed.status < 500, `with a key: ${keyed.status} ${await keyed.text()}`);
    t.false(app.logs.some((line) => line.level >= 50), 'no error-level log line');
  });
}

for (const path of ['/v1/messages/', '/v1/MESSAGES']) {
  test(`POST ${path}: either an unknown URL, or the Messages endpoint in Shape B with request-id, key or not`, async (t) => {
    const send = (headers: Record<string, string>) =>
      fetch(`${app.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{' });
    const keyed = await send({ 'x-api-key': await app.keyFor() });
    const keyedBody = (await keyed.json()) as { error: { code?: string } };
    if (keyed.status === 404 && keyedBody.error.code === 'unknown_url') return t.pass('not served: an unknown URL');
    for (const [what, response, body] of [['with a key', keyed, keyedBody], ['without a key', await send({}), null]] as const) {
      const shown = (body ?? (await response.json())) as { type?: string; request_id?: string };
      t.is(shown.type, 'error', `${what}: ${response.status} ${JSON.stringify(shown)}`);
      t.regex(shown.request_id ?? '', /^req_[A-Za-z0-9]{32}$/, what);
      t.is(response.headers.get('request-id'), shown.request_id ?? null, what);
    }
  });
}

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
