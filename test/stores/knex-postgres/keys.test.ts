import test from 'ava';
import { keyChangesContract } from '../../../lib/testing/key-changes-contract.js';
import { keyRotationContract, keyStoreContract } from '../../../lib/testing/key-store-contract.js';
import { contractStores, POSTGRES_CONTRACT_TESTS_AT_ONCE, rotationAcrossProcesses } from '../../helpers/contract-stores.js';
import { fewAtOnce, postgresDatabase, withPostgres } from '../../helpers/services.js';

// The contracts of the key store, key rotation and key changes on the Knex stores on PostgreSQL;
// the other families in the files beside this one (contract-stores says why).

const stores = contractStores(test);
const postgres = stores.eachTestCloses(fewAtOnce(withPostgres(test), POSTGRES_CONTRACT_TESTS_AT_ONCE));

keyStoreContract(postgres, 'postgres KnexKeyStore', () => stores.keyStore(postgresDatabase));
keyStoreContract(postgres, 'postgres KnexKeyStore, prepared reads', () => stores.keyStore(postgresDatabase, { prepared: true }));
keyRotationContract(postgres, 'postgres KnexKeyStore', () => stores.keyViews(postgresDatabase));
rotationAcrossProcesses(postgres, 'postgres KnexKeyStore', stores, postgresDatabase);
keyChangesContract(postgres, 'postgres KnexKeyChanges', () => stores.keyChangesPair(postgresDatabase));
