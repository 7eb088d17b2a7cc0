import { relative, sep } from 'node:path';
import type { DatabaseSettings } from './config.js';

/** The store a CLI command writes to, as an operator reads it: never a password. */
export interface StoreDescription {
  kind: 'PostgreSQL' | 'SQLite';
  /** `postgres://user@host:port/database`, or the SQLite file (relative to `cwd` when inside it). */
  location: string;
}

/**
 * Where the CLI writes: a key made against the wrong database (no `DATABASE_URL` in the CLI's
 * environment, the server on PostgreSQL) is otherwise only found out by a 401.
 * @example describeStore({ client: 'sqlite', filename: '/srv/data/gateway.sqlite' }, '/srv') // { kind: 'SQLite', location: './data/gateway.sqlite' }
 */
export function describeStore(settings: DatabaseSettings, cwd = process.cwd()): StoreDescription {
  if (settings.client === 'sqlite') {
    const inside = relative(cwd, settings.filename);
    const location = inside === '' || inside.startsWith('..') || inside === settings.filename ? settings.filename : `.${sep}${inside}`;
    return { kind: 'SQLite', location };
  }
  // The user, host, port and database only: the password and any query (which may hold one) are dropped.
  const url = new URL(settings.connectionString);
  const user = url.username === '' ? '' : `${url.username}@`;
  return { kind: 'PostgreSQL', location: `postgres://${user}${url.hostname}:${url.port || '5432'}${url.pathname}` };
}

/** The line the CLI prints on stderr, so that stdout stays the secret alone for scripts. */
export const storeLine = (store: StoreDescription) => `in ${store.kind} ${store.location}`;
