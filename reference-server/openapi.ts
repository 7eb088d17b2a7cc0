import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import Router from '@koa/router';

/**
 * `GET /openapi.json`, without a key: the API's OpenAPI document, as the package ships it
 * (`koa-model-gateway/openapi.json`, docs/openapi.json in the repository), read once.
 * @example app.use(openApiRouter().routes())
 */
export function openApiRouter(): Router {
  const document = readFileSync(createRequire(import.meta.url).resolve('koa-model-gateway/openapi.json'));
  const router = new Router({ sensitive: true, strict: true });
  router.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = document;
  });
  return router;
}
