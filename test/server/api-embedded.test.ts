import test from 'ava';
import { serverApiSuite } from '../helpers/server-api-suite.js';
import { tempDataDir } from '../helpers/server-process.js';

// The embedded default: SQLite file, in-memory limits and files on disk, all under DATA_DIR.
serverApiSuite(test, 'embedded', async () => {
  const data = await tempDataDir();
  return { env: { DATA_DIR: data.dir }, cleanup: data.remove };
});
