import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import Koa from 'koa';
import { pino } from 'pino';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { dashboardRouter } from '../../reference-server/dashboard.js';
import { listen } from '../helpers/http.js';

async function serve(dir: string) {
  const app = new Koa();
  app.use(openAIErrors());
  app.use(dashboardRouter(pino({ level: 'silent' }), dir).routes());
  return listen(app);
}

test('the page is served with a CSP that admits only its own files, its hashed assets cached for good, nothing else', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-dashboard-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'assets'));
  await writeFile(join(dir, 'index.html'), '<!doctype html><script type="module" src="/dashboard/assets/index-abc.js"></script>');
  await writeFile(join(dir, 'assets', 'index-abc.js'), 'console.log(1)');
  const server = await serve(dir);
  t.teardown(() => server.close());

  const page = await fetch(`${server.url}/dashboard`);
  t.is(page.status, 200);
  t.is(page.headers.get('content-type'), 'text/html; charset=utf-8');
  const csp = page.headers.get('content-security-policy') ?? '';
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /script-src 'self'(;|$)/);
  t.notRegex(csp, /unsafe-inline|unsafe-eval/);
  t.regex(await page.text(), /index-abc\.js/);
  const script = await fetch(`${server.url}/dashboard/assets/index-abc.js`);
  t.is(script.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  t.regex(script.headers.get('content-type') ?? '', /javascript/);
  for (const path of ['/dashboard/assets/other.js', '/dashboard/assets/..%2Findex.html', '/dashboard/index.html']) {
    t.is((await fetch(`${server.url}${path}`)).status, 404, path);
  }
});

test('without a build, /dashboard says how to make one', async (t) => {
  const server = await serve(join(tmpdir(), 'kmg-no-such-build'));
  t.teardown(() => server.close());
  const page = await fetch(`${server.url}/dashboard`);
  t.is(page.status, 503);
  t.regex(await page.text(), /npm run build:dashboard/);
});
