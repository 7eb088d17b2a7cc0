/**
 * The packages among `names` that cannot be imported from here. The reference server's own
 * packages (knex, pino, the database drivers, ioredis) are optional peer dependencies, so that a
 * team using only the middleware does not install them: a missing one must be named, not crash.
 * @example missingPackages(['knex', 'pino']) // [] once both are installed
 */
export function missingPackages(names: readonly string[]): string[] {
  return names.filter((name) => {
    try {
      import.meta.resolve(name);
      return false;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') return true;
      throw err;
    }
  });
}
