import test from 'ava';
import Koa from 'koa';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { underPath } from '../../lib/under-path.js';
import { listen } from '../helpers/http.js';

// No routes at all: every answer is the formatter's, so the shape is decided by the path alone.
const app = new Koa();
app.use(gatewayErrors());
const server = await listen(app);
test.after.always(() => server.close());

for (const path of ['/v1/messages', '/v1/messages/count_tokens', '/v1/messages/', '/v1/messages/batches/x']) {
  test(`${path}, known or not, answers in Shape B with request-id (decisions.md "Beyond the seed")`, async (t) => {
    const response = await fetch(`${server.url}${path}`);
    const body = (await response.json()) as { type: string; error: { type: string; message: string }; request_id: string };
    t.is(response.status, 404);
    t.deepEqual(body, { type: 'error', error: { type: 'not_found_error', message: `Unknown request URL: GET ${path}` }, request_id: body.request_id });
    t.is(response.headers.get('request-id'), body.request_id);
    t.is(response.headers.get('x-request-id'), null);
  });
}

for (const path of ['/v1/models', '/v1/messagesx', '/v1/Messages', '/v2/messages']) {
  test(`${path} answers in Shape A with X-Request-Id`, async (t) => {
    const response = await fetch(`${server.url}${path}`);
    t.like(await response.json(), { error: { code: 'unknown_url', param: null } });
    t.regex(response.headers.get('x-request-id') ?? '', /^req_/);
  });
}

for (const path of ['/v1/models', '/v1/models/echo-1', '/v1/files', '/v1/files/file-x/content']) {
  test(`${path} answers in Shape B with anthropic-version, in Shape A without it`, async (t) => {
    const anthropic = await fetch(`${server.url}${path}`, { headers: { 'anthropic-version': '2023-06-01' } });
    const body = (await anthropic.json()) as { request_id: string };
    t.deepEqual(body, { type: 'error', error: { type: 'not_found_error', message: `Unknown request URL: GET ${path}` }, request_id: body.request_id });
    t.is(anthropic.headers.get('request-id'), body.request_id);
    const openai = await fetch(`${server.url}${path}`);
    t.like(await openai.json(), { error: { code: 'unknown_url', param: null } });
    t.regex(openai.headers.get('x-request-id') ?? '', /^req_/);
  });
}

test('anthropicShape chooses Shape B per request', async (t) => {
  const custom = new Koa();
  custom.use(gatewayErrors({ anthropicShape: (ctx) => ctx.get('anthropic-version') !== '' }));
  const listening = await listen(custom);
  t.teardown(listening.close);
  const anthropic = await fetch(`${listening.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } });
  t.like(await anthropic.json(), { type: 'error', error: { type: 'not_found_error' } });
  t.like(await (await fetch(`${listening.url}/v1/models`)).json(), { error: { code: 'unknown_url' } });
});

test('underPath runs its middleware for the prefix and the paths under it only, compared exactly', async (t) => {
  const seen: string[] = [];
  const paths = new Koa();
  paths.use(
    underPath('/v1', async (ctx, next) => {
      seen.push(ctx.path);
      await next();
    }),
  );
  paths.use((ctx) => {
    ctx.body = 'ok';
  });
  const listening = await listen(paths);
  t.teardown(listening.close);
  for (const path of ['/v1', '/v1/', '/v1/files/x', '/V1/files', '/v10', '/healthz']) await fetch(`${listening.url}${path}`);
  t.deepEqual(seen, ['/v1', '/v1/', '/v1/files/x']);
  t.throws(() => underPath('/v1/', async () => undefined), { instanceOf: TypeError });
});
