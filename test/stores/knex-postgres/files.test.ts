import test from 'ava';
import { fileStoreContract } from '../../../lib/testing/file-store-contract.js';
import { contractStores, POSTGRES_CONTRACT_TESTS_AT_ONCE } from '../../helpers/contract-stores.js';
import { fewAtOnce, postgresDatabase, withPostgres } from '../../helpers/services.js';

// The file store's contract on the Knex store on PostgreSQL; the other families in the files
// beside this one (contract-stores says why).

const stores = contractStores(test);
const postgres = stores.eachTestCloses(fewAtOnce(withPostgres(test), POSTGRES_CONTRACT_TESTS_AT_ONCE));

const seed = { seed: stores.seedFiles };
fileStoreContract(postgres, 'postgres KnexFileStore', () => stores.fileStore(postgresDatabase), seed);
fileStoreContract(postgres, 'postgres KnexFileStore, prepared reads', () => stores.fileStore(postgresDatabase, { prepared: true }), seed);

postgres('postgres: file ids are stored in the "C" collation, so index order is byte order', async (t) => {
  const knex = await stores.migrated(postgresDatabase);
  const result = await knex.raw<{ rows: { collation_name: string }[] }>(
    `select collation_name from information_schema.columns
     where table_schema = current_schema() and table_name = 'kmg_files' and column_name = 'id'`,
  );
  t.deepEqual(result.rows, [{ collation_name: 'C' }]);
});
