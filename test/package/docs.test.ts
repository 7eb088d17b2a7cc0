import { readFileSync } from 'node:fs';
import test from 'ava';
import * as testing from '../../lib/testing/index.js';

// Claims of docs/ that the code can check: the store interfaces EXTENDING.md and ARCHITECTURE.md list.

const read = (path: string) => readFileSync(new URL(`../../../${path}`, import.meta.url), 'utf8');

const manifest = JSON.parse(read('package.json')) as { exports: Record<string, unknown> };
/** Each entry point with code: its path in package.json and its source file. */
const entryPoints = Object.entries(manifest.exports).flatMap(([path, entry]) =>
  typeof entry === 'string' ? [] : [{ path, source: (entry as Record<string, string>)['@koa-model-gateway/source'] as string }],
);

const load = async (source: string) =>
  (await import(new URL(`../../${source.replace(/^\.\//, '').replace(/\.ts$/, '.js')}`, import.meta.url).href)) as Record<string, unknown>;

/**
 * The interfaces the stores implement, read from what `koa-model-gateway/stores/*` export: each
 * store class is named after its family and its interface (`MemoryKeyStore`, `KnexAuditStore`,
 * `RedisCooldownStore`, `FsBlobStore`).
 */
async function storeInterfaces(): Promise<string[]> {
  const interfaces = new Set<string>();
  for (const { path, source } of entryPoints.filter((entry) => entry.path.startsWith('./stores/'))) {
    const family = path.slice('./stores/'.length);
    const prefix = new RegExp(`^${family}(?=[A-Z])`, 'i');
    for (const [name, value] of Object.entries(await load(source))) {
      if (typeof value === 'function' && /^class\b/.test(Function.prototype.toString.call(value)) && prefix.test(name))
        interfaces.add(name.replace(prefix, ''));
    }
  }
  return [...interfaces].sort();
}

const EXTENDING = read('docs/EXTENDING.md');
const storeSection = EXTENDING.slice(EXTENDING.indexOf('## A store'), EXTENDING.indexOf('## A format'));
const ticked = (text: string) => [...text.matchAll(/`(\w+)`/g)].map((match) => match[1] as string);
/** The interfaces named in the section's first sentence. */
const listed = ticked(/A store implements one small interface: ([^(]+)\(/.exec(storeSection)?.[1] ?? '');

test("EXTENDING.md's list of store interfaces is every interface the stores entry points implement", async (t) => {
  t.deepEqual([...listed].sort(), await storeInterfaces());
});

test("EXTENDING.md's table of contract suites has a row per store interface, each suite exported by koa-model-gateway/testing", async (t) => {
  const rows = [...storeSection.matchAll(/^\| `(\w+)` \| (.*) \|$/gm)].map(([, name = '', suites = '']) => ({ name, suites }));
  t.deepEqual(rows.map((row) => row.name).sort(), await storeInterfaces());
  for (const { name, suites } of rows) {
    const suite = `${name.charAt(0).toLowerCase()}${name.slice(1)}Contract`;
    t.true(suites.includes(`\`${suite}(`), `${name}'s row names ${suite}()`);
    t.is(typeof (testing as Record<string, unknown>)[suite], 'function', `koa-model-gateway/testing exports ${suite}`);
  }
});

test('every store interface is exported, as a type, by one of the feature entry points', (t) => {
  const features = entryPoints.filter(({ path }) => !path.startsWith('./stores/')).map(({ source }) => read(source.replace(/^\.\//, '')));
  t.not(listed.length, 0);
  for (const name of listed) {
    t.true(
      features.some((text) => new RegExp(`export (type )?\\{[^}]*\\b${name}\\b[^}]*\\}`).test(text)),
      `${name} is exported`,
    );
  }
});

test("ARCHITECTURE.md's table of stores has a row per store interface", async (t) => {
  const architecture = read('docs/ARCHITECTURE.md');
  const stores = architecture.slice(architecture.indexOf('## Stores'), architecture.indexOf('\n## ', architecture.indexOf('## Stores') + 1));
  const rows = [...stores.matchAll(/^\| `(\w+)` \(lib\//gm)].map(([, name = '']) => name);
  t.deepEqual(rows.sort(), await storeInterfaces());
});
