import test from 'ava';
import { serverApiSuite } from '../helpers/server-api-suite.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { tempDataDir } from '../helpers/server-process.js';
import { REDIS_URL, withPostgres, withRedis } from '../helpers/services.js';

// PostgreSQL (a database of its own) and Redis, files on disk.
serverApiSuite(withRedis(withPostgres(test)), 'postgres+redis', async () => {
  const [data, database] = await Promise.all([tempDataDir(), throwawayPostgres()]);
  return {
    env: { DATA_DIR: data.dir, DATABASE_URL: database.url, REDIS_URL },
    async cleanup() {
      await database.drop();
      await data.remove();
    },
  };
});
