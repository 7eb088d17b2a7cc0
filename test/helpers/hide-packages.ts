/**
 * Loaded with `node --import` before a program: the packages (or subpath exports, `pkg/sub`)
 * named in KMG_TEST_HIDDEN_PACKAGES (comma-separated) cannot be resolved from then on, as if they
 * were not installed, though they are in node_modules. Resolution hooks (node:module `register`)
 * apply to `import.meta.resolve` too, which is how the reference server looks for its optional
 * packages.
 */
import { register } from 'node:module';

const hidden = (process.env.KMG_TEST_HIDDEN_PACKAGES ?? '').split(',').filter((name) => name !== '');
register('./hide-packages-hooks.js', import.meta.url, { data: { hidden } });
