import { defineConfig } from 'vite';

// Built by `npm run build:dashboard` from the package root into dist/dashboard, which the
// reference server serves at /dashboard (reference-server/dashboard.ts).
export default defineConfig({
  root: 'dashboard',
  base: '/dashboard/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: '../dist/dashboard',
    emptyOutDir: true,
    target: 'es2022',
    // One script, one stylesheet: the page's CSP allows only files of its own origin.
    modulePreload: false,
    reportCompressedSize: false,
  },
});
