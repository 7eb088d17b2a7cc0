import test from 'ava';
import { filesApiSuite, filesRequestSuite } from '../helpers/files-api-suite.js';
import { knexStores, memoryStores } from '../helpers/file-stores.js';
import { postgresDatabase, sqliteDatabase, withPostgres } from '../helpers/services.js';

filesRequestSuite(test);
filesApiSuite(test, 'memory', memoryStores);
filesApiSuite(test, 'sqlite + fs', () => knexStores(sqliteDatabase));
filesApiSuite(withPostgres(test), 'postgres + fs', () => knexStores(postgresDatabase));
