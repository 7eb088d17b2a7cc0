import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import test from 'ava';
import { ROOT } from '../helpers/server-process.js';

// lib/'s folders, bottom first: a module imports from its own folder or one below, never above,
// so that each folder can be read, tested and replaced knowing only those under it.
// docs/ARCHITECTURE.md, "Layers", says why each sits where it does.
const LAYERS = [
  'settings', // option schemas' building blocks (zod only)
  'errors', // GatewayError, the two shapes and the one formatter
  'http', // a request's JSON body, server-sent events, after the response, the Anthropic-shape test
  'quota', // model and creation limits, clock windows
  'usage', // usage records, their store and recorder, token counts
  'cost', // prices, spend, budgets (from the usage records)
  'auth', // API keys (with their limits), scopes, the key-use recorder (on the usage recorder's timers)
  'files', // file stores, uploads, the files router and its creation quota
  'metrics', // the gateway's Prometheus metrics, fed by the models' meter
  'models', // model endpoints, formats, providers, routing
  'tracing', // spans of requests and upstream attempts
  'admin', // the admin API, its auth and audit trail
  'stores', // the stores' implementations, each of an interface above
  'testing', // the contract suites, over everything
];

// lib/*.ts beside the folders: leaves that import nothing of lib/ (random.ts, printable-text.ts,
// under-path.ts, picodollars.ts), the package root (index.ts) and state.ts.
const ROOT_INDEX = 'index.ts';
// Every ctx.state type, types only: imported as types from any layer, it imports any as types.
const STATE = 'state.ts';

const LIB = join(ROOT, 'lib');
// Static imports and re-exports (`import type` and `export type` apart), then dynamic imports.
const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s+)?'([^']+)'|\bimport\(\s*'([^']+)'/g;

interface Import {
  from: string;
  to: string;
  typeOnly: boolean;
}

async function libFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((entry) => (entry.isDirectory() ? libFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [])),
  );
  return nested.flat();
}

/** Every import and re-export of lib/ by a relative path, as paths relative to lib/. */
async function libImports(): Promise<Import[]> {
  const found: Import[] = [];
  for (const file of await libFiles(LIB)) {
    const source = await readFile(file, 'utf8');
    for (const [, type, staticSpecifier, dynamicSpecifier] of source.matchAll(IMPORT)) {
      const specifier = staticSpecifier ?? dynamicSpecifier;
      if (!specifier?.startsWith('.')) continue;
      const to = relative(LIB, join(dirname(file), specifier)).split(sep).join('/');
      found.push({ from: relative(LIB, file).split(sep).join('/'), to: to.replace(/\.js$/, '.ts'), typeOnly: type !== undefined });
    }
  }
  return found;
}

const folderOf = (path: string) => (path.includes('/') ? path.slice(0, path.indexOf('/')) : null);
const isEntryPoint = (path: string) => path === ROOT_INDEX || /^[^/]+\/index\.ts$/.test(path) || /^stores\/[^/]+\/index\.ts$/.test(path);

/** What is wrong with one import, or null. */
function breach({ from, to, typeOnly }: Import): string | null {
  if (to.startsWith('..')) return 'leaves lib/';
  if (to === STATE) return typeOnly ? null : 'imports state.ts for more than types';
  if (from === STATE) return typeOnly ? null : 'state.ts imports more than types';
  // An entry point re-exports what its users import from it, from wherever it lives.
  if (isEntryPoint(from)) return null;
  const fromFolder = folderOf(from);
  const toFolder = folderOf(to);
  if (fromFolder === null) return 'a leaf of lib/ imports from lib/';
  if (toFolder === null) return null;
  if (toFolder === fromFolder) return null;
  const fromLayer = LAYERS.indexOf(fromFolder);
  const toLayer = LAYERS.indexOf(toFolder);
  if (fromLayer === -1 || toLayer === -1) return `a folder with no layer (${fromLayer === -1 ? fromFolder : toFolder})`;
  return toLayer > fromLayer ? `imports upward, ${fromFolder} → ${toFolder}` : null;
}

test('lib/ imports go down the layers only', async (t) => {
  const imports = await libImports();
  t.true(imports.length > 300, 'the imports were read');
  const breaches = imports.flatMap((found) => {
    const why = breach(found);
    return why === null ? [] : [`${found.from} → ${found.to}: ${why}`];
  });
  t.deepEqual(breaches, []);
});

test('every folder of lib/ has its layer', async (t) => {
  const folders = (await readdir(LIB, { withFileTypes: true })).filter((entry) => entry.isDirectory()).map((entry) => entry.name);
  t.deepEqual(folders.filter((folder) => !LAYERS.includes(folder)), []);
});

test('the check finds an upward import, one that leaves lib/ and a value taken from state.ts', (t) => {
  t.is(breach({ from: 'quota/file-quota.ts', to: 'auth/api-key.ts', typeOnly: false }), 'imports upward, quota → auth');
  t.is(breach({ from: 'models/catalog.ts', to: '../reference-server/config.ts', typeOnly: false }), 'leaves lib/');
  t.is(breach({ from: 'auth/api-key.ts', to: 'state.ts', typeOnly: false }), 'imports state.ts for more than types');
  t.is(breach({ from: 'random.ts', to: 'errors/gateway-error.ts', typeOnly: false }), 'a leaf of lib/ imports from lib/');
  t.is(breach({ from: 'admin/admin-router.ts', to: 'files/file-limits.ts', typeOnly: false }), null);
});
