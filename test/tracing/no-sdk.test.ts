import test from 'ava';
import Koa from 'koa';
import { pino } from 'pino';
import { apiKey } from '../../lib/auth/api-key.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES } from '../../lib/auth/scopes.js';
import { gatewayErrors } from '../../lib/errors/gateway-errors.js';
import { modelsRouter } from '../../lib/models/models-router.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { traceRequests } from '../../lib/tracing/trace-requests.js';
import { tracedStore } from '../../lib/tracing/traced-store.js';
import { underPath } from '../../lib/under-path.js';
import { requestLog } from '../../reference-server/request-log.js';
import { listen } from '../helpers/http.js';
import { CATALOG, catalogProviders } from '../helpers/models-app.js';
import { reply, scriptedUpstream } from '../helpers/models-upstream.js';
import { until } from '../helpers/poll.js';

// No OpenTelemetry SDK is registered in this file's process: the API's no-op tracer answers.
test('without an SDK the middleware passes every call through, sends no trace context and logs no trace id', async (t) => {
  const upstream = await scriptedUpstream();
  const keys = new MemoryKeyStore();
  const lines: Array<Record<string, unknown>> = [];
  const app = new Koa();
  app.use(traceRequests());
  app.use(requestLog(pino({ base: null }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) })));
  app.use(gatewayErrors());
  app.use(underPath('/v1', apiKey({ store: keys })));
  const router = modelsRouter({
    catalog: CATALOG,
    providers: catalogProviders(upstream.url),
    modelLimiter: tracedStore(new MemoryModelLimiter(), 'ModelLimiter'),
  });
  app.use(router.routes());
  const server = await listen(app);
  t.teardown(() => Promise.all([server.close(), upstream.close()]));
  const { key } = await createApiKey(keys, { prefix: 'kmg', account: 'acme', scopes: [...SCOPES], models: null });

  upstream.answer(
    '/v1/chat/completions',
    reply(200, { id: 'chatcmpl-1', object: 'chat.completion', model: 'gpt', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 } }),
  );
  const response = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
  });
  t.is(response.status, 200);
  t.is(((await response.json()) as { model: string }).model, 'gpt-test');
  t.is(upstream.received[0]?.headers.traceparent, undefined);
  const [line] = await until(
    async () => lines,
    (all) => all.length > 0,
  );
  t.is(line?.status, 200);
  t.false('traceId' in (line ?? {}));
});
