import type { Knex } from 'knex';
import type { KeyStore } from '../lib/auth/key-store.js';
import { KnexKeyStore } from '../lib/stores/knex/key-store.js';
import type { ServerConfig } from './config.js';
import { openMigratedDatabase } from './database.js';
import type { ReadinessCheck } from './health.js';

/** Every backing service of one server process, opened from the configuration. */
export interface Deployment {
  config: ServerConfig;
  knex: Knex;
  keys: KeyStore;
  /** What `/readyz` asks. */
  checks: Record<string, ReadinessCheck>;
  /** Closes the pools and clients; the process can then exit. */
  close(): Promise<void>;
}

/**
 * Opens the database (migrated) and the stores on it. Fails with a `ConfigError` when a backing
 * service cannot be reached.
 */
export async function openDeployment(config: ServerConfig): Promise<Deployment> {
  const knex = await openMigratedDatabase(config.database);
  return {
    config,
    knex,
    keys: new KnexKeyStore(knex),
    checks: { database: () => knex.raw('select 1') },
    close: () => knex.destroy(),
  };
}
