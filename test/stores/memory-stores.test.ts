import test from 'ava';
import { cachedKeyStore } from '../../lib/auth/cached-key-store.js';
import { MemoryAccountBudgetStore } from '../../lib/stores/memory/account-budget-store.js';
import { MemoryAdminSessionStore } from '../../lib/stores/memory/admin-session-store.js';
import { MemoryAdminUserStore } from '../../lib/stores/memory/admin-user-store.js';
import { MemoryAdminTokenStore } from '../../lib/stores/memory/admin-token-store.js';
import { MemoryAlertClaims } from '../../lib/stores/memory/alert-claims.js';
import { MemoryAuditStore } from '../../lib/stores/memory/audit-store.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryCooldownStore } from '../../lib/stores/memory/cooldown-store.js';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';
import { MemoryKeyChanges } from '../../lib/stores/memory/key-changes.js';
import { MemoryKeyStore } from '../../lib/stores/memory/key-store.js';
import { MemoryModelLimiter } from '../../lib/stores/memory/model-limiter.js';
import { MemorySpendLedger } from '../../lib/stores/memory/spend-ledger.js';
import { MemoryUsageStore } from '../../lib/stores/memory/usage-store.js';
import { accountBudgetStoreContract } from '../../lib/testing/account-budget-store-contract.js';
import { adminSessionStoreContract } from '../../lib/testing/admin-session-store-contract.js';
import { adminUserStoreContract } from '../../lib/testing/admin-user-store-contract.js';
import { adminTokenStoreContract } from '../../lib/testing/admin-token-store-contract.js';
import { alertClaimsContract } from '../../lib/testing/alert-claims-contract.js';
import { auditStoreContract } from '../../lib/testing/audit-store-contract.js';
import { blobStoreContract } from '../../lib/testing/blob-store-contract.js';
import { cooldownStoreContract } from '../../lib/testing/cooldown-store-contract.js';
import { creationLimiterContract } from '../../lib/testing/creation-limiter-contract.js';
import { fileStoreContract } from '../../lib/testing/file-store-contract.js';
import { keyChangesContract } from '../../lib/testing/key-changes-contract.js';
import { keyRotationContract, keyStoreContract } from '../../lib/testing/key-store-contract.js';
import { modelLimiterContract } from '../../lib/testing/model-limiter-contract.js';
import { spendLedgerContract } from '../../lib/testing/spend-ledger-contract.js';
import { usageStoreContract } from '../../lib/testing/usage-store-contract.js';

// Every store family's contract on its memory store (lib/stores/memory): one file per
// implementation, knex-sqlite-stores, knex-postgres-stores and redis-stores the others.

keyStoreContract(test, 'MemoryKeyStore', async () => new MemoryKeyStore());
keyStoreContract(test, 'MemoryKeyStore behind cachedKeyStore', async () => cachedKeyStore(new MemoryKeyStore()));
keyRotationContract(test, 'MemoryKeyStore', async () => {
  const store = new MemoryKeyStore();
  return [store, store];
});
keyChangesContract(test, 'MemoryKeyChanges', async () => {
  const changes = new MemoryKeyChanges();
  return { publisher: changes, subscriber: changes, carriesIds: true };
});

fileStoreContract(test, 'MemoryFileStore', async () => new MemoryFileStore());
blobStoreContract(test, 'MemoryBlobStore', async () => new MemoryBlobStore());
creationLimiterContract(test, 'MemoryCreationLimiter', async (options) => new MemoryCreationLimiter(options));

modelLimiterContract(test, 'MemoryModelLimiter', async (clock) => new MemoryModelLimiter({ nowMs: clock }));
cooldownStoreContract(test, 'MemoryCooldownStore', async () => new MemoryCooldownStore());
alertClaimsContract(test, 'MemoryAlertClaims', async () => new MemoryAlertClaims());

usageStoreContract(test, 'MemoryUsageStore', async () => new MemoryUsageStore());
spendLedgerContract(test, 'MemorySpendLedger', async (nowMs, spentBefore) => new MemorySpendLedger({ nowMs, ...(spentBefore && { spentBefore }) }));
accountBudgetStoreContract(test, 'MemoryAccountBudgetStore', async () => new MemoryAccountBudgetStore());

adminTokenStoreContract(test, 'MemoryAdminTokenStore', async () => new MemoryAdminTokenStore());
adminSessionStoreContract(test, 'MemoryAdminSessionStore', async () => new MemoryAdminSessionStore());
adminUserStoreContract(test, 'MemoryAdminUserStore', async () => new MemoryAdminUserStore());
auditStoreContract(test, 'MemoryAuditStore', async () => new MemoryAuditStore());
