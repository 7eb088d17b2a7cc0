import test from 'ava';
import { filesApiSuite } from '../helpers/files-api-suite.js';
import { knexStores, memoryStores } from '../helpers/file-stores.js';
import { postgresDatabase, sqliteDatabase, withPostgres } from '../helpers/services.js';

filesApiSuite(test, 'memory', memoryStores);
filesApiSuite(test, 'sqlite + fs', () => knexStores(sqliteDatabase));
filesApiSuite(withPostgres(test), 'postgres + fs', () => knexStores(postgresDatabase));
