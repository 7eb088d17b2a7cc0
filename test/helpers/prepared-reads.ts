import Sqlite from 'better-sqlite3';
import pg from 'pg';
import { postgresPreparedReads, sqlitePreparedReads, type PreparedReads } from '../../lib/stores/knex/prepared-reads.js';
import { POSTGRES_URL, type TestDatabase } from './services.js';

export interface TestPreparedReads {
  reads: PreparedReads;
  close(): Promise<void>;
}

/**
 * Prepared reads on the data of `db`, as a deployment makes them: a read-only better-sqlite3
 * connection to its file, or a pg pool on its schema. Open it after `migrate`.
 */
export function preparedReadsOn(db: TestDatabase): TestPreparedReads {
  if (db.config.client === 'better-sqlite3') {
    const { filename } = db.config.connection as { filename: string };
    const reader = new Sqlite(filename, { readonly: true, fileMustExist: true });
    return { reads: sqlitePreparedReads(reader), close: async () => void reader.close() };
  }
  const [schema] = db.config.searchPath as string[];
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}`, max: 1, idleTimeoutMillis: 1000 });
  return { reads: postgresPreparedReads(pool), close: () => pool.end() };
}
