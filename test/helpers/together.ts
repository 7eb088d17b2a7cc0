// A group's worker loads its files as one module graph (test/groups/; docs/TESTING.md, "How they run").

/**
 * Imports the test files `files` (relative to `base`, as compiled) into this worker, together.
 * AVA starts a worker's tests on the tick after the first is declared, so every file must declare
 * its tests in the same synchronous evaluation: the only module with top-level awaits the files
 * share, services.ts, is loaded first, and the files themselves must have none.
 */
export async function loadTogether(base: string, files: string[]): Promise<void> {
  await import('./services.js');
  const graph = files.map((file) => `import ${JSON.stringify(new URL(file, base).href)};`).join('\n');
  await import(`data:text/javascript,${encodeURIComponent(graph)}`);
}
