import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import type { Logger } from 'pino';

/** The built page may load its own scripts, styles and images, and talk to its own origin only. */
const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The checkout or installed package this file belongs to: the nearest folder up with a package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir);
  return dir;
}

/** Where `npm run build:dashboard` puts the page, from source (tsx) and from dist alike. */
export const DASHBOARD_BUILD_DIR = join(packageRoot(), 'dist', 'dashboard');

/** Every file under `dir`, by its URL path below it (`assets/index-abc.js`). */
function readBuild(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(relative(dir, path).split(sep).join('/'), readFileSync(path));
  }
  return files;
}

/**
 * `GET /dashboard`: the dashboard page, a static build (Vite, in `dashboard/`) held in memory
 * from start-up: `index.html` with a Content-Security-Policy that allows only its own scripts and
 * styles, and its hashed assets, cached for good. The page talks to the admin API only.
 * Without a build, it says how to make one (503).
 */
export function dashboardRouter(logger: Logger, dir = DASHBOARD_BUILD_DIR): Router {
  const files = existsSync(join(dir, 'index.html')) ? readBuild(dir) : undefined;
  if (!files) logger.warn({ dir }, 'the dashboard is not built: run npm run build:dashboard');
  const router = new Router({ sensitive: true, strict: true });
  router.get(['/dashboard', '/dashboard/'], (ctx) => {
    if (!files) {
      ctx.status = 503;
      ctx.body = 'The dashboard is not built: run npm run build:dashboard, then restart the server.\n';
      return;
    }
    ctx.set('Content-Security-Policy', PAGE_CSP);
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.type = 'html';
    ctx.body = files.get('index.html');
  });
  router.get('/dashboard/assets/:name', (ctx) => {
    const body = files?.get(`assets/${ctx.params.name}`);
    if (body === undefined) return; // unknown_url
    // Vite names every asset after its content: a changed file is a new URL.
    ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
    ctx.type = extname(ctx.params.name as string);
    ctx.body = body;
  });
  return router;
}
