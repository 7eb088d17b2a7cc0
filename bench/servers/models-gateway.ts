/**
 * The models API composed from lib/ as the reference server composes it (gatewayErrors, apiKey
 * under /v1, modelsRouter on the offline echo provider), with metering on or off, for the
 * metering bench. METERING=on adds what the reference server runs for each model call: a usage
 * record written in batches to SQLite (KnexUsageStore in DATA_DIR, opened as the reference server
 * opens its database), the key's limits counted in
 * memory (limits high enough never to refuse), and the metrics (httpMetrics first in the chain,
 * each call observed). METERING=off has none of them. Both name the catalog id in answers and
 * read the upstream's usage: that is the format's work, not metering's.
 * The key is BENCH_KEY (its hash stored in a memory KeyStore). GET /healthz: 200.
 * Run: PORT=8082 METERING=on DATA_DIR=/tmp/x BENCH_KEY=kmg_sk_... node --import tsx bench/servers/models-gateway.ts
 */
import { join } from 'node:path';
import Koa from 'koa';
import { apiKey, gatewayErrors, underPath } from 'koa-model-gateway';
import { SCOPES, hashApiKey } from 'koa-model-gateway/auth';
import { echoProvider, modelsRouter, type ModelsRouterOptions } from 'koa-model-gateway/models';
import { usageRecorder } from 'koa-model-gateway/usage';
import { createGatewayMetrics, httpMetrics } from 'koa-model-gateway/metrics';
import { KnexUsageStore } from 'koa-model-gateway/stores/knex';
import { MemoryKeyStore } from 'koa-model-gateway/stores/memory';
import { openMigratedDatabase } from '../../reference-server/database.js';

const port = Number(process.env.PORT ?? 8082);
const metering = process.env.METERING === 'on';
const key = process.env.BENCH_KEY ?? '';

const keys = new MemoryKeyStore();
const limits = metering ? { requestsPerMinute: 1_000_000_000, tokensPerDay: 1_000_000_000_000 } : {};
await keys.create({ account: 'acct_bench', hash: hashApiKey(key), scopes: [...SCOPES], models: null, expiresAt: null, limits });

const options: ModelsRouterOptions = {
  catalog: [{ id: 'echo-1', provider: 'echo', upstreamModel: 'echo-upstream-1' }],
  providers: [echoProvider({ id: 'echo' })],
};
const app = new Koa();
let closeUsage = async () => undefined;
if (metering) {
  // SQLite as the reference server opens it (WAL, synchronous = NORMAL).
  const database = await openMigratedDatabase({ client: 'sqlite', filename: join(process.env.DATA_DIR ?? '.', 'usage.sqlite') });
  const usage = usageRecorder({ store: new KnexUsageStore(database.knex) });
  const metrics = createGatewayMetrics();
  Object.assign(options, { usageRecorder: usage, metrics });
  app.use(httpMetrics({ metrics }));
  closeUsage = async () => {
    await usage.close();
    await database.close();
  };
}
const models = modelsRouter(options);
app.use(gatewayErrors());
app.use(underPath('/v1', apiKey({ store: keys })));
app.use(models.routes()).use(models.allowedMethods());
app.use(async function health(ctx, next) {
  if (ctx.path !== '/healthz') return next();
  ctx.body = { status: 'ok' };
});

const server = app.listen(port, '127.0.0.1');
process.once('SIGTERM', () => server.close(() => void closeUsage().then(() => process.exit(0))));
