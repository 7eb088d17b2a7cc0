/**
 * `koa-model-gateway/testing`: the contract suites, run with your test runner's `test` function:
 * `providerContract()` for a provider, one suite per store interface for a store.
 */
export { providerContract, type ContractAssertions, type ContractTest, type ProviderContractOptions, type UpstreamScript } from './provider-contract.js';
export type { StoreAssertions, StoreContractTest, ThrowsAnyExpectation, ThrowsExpectation } from './store-contract-test.js';
export { keyStoreContract, keyRotationContract } from './key-store-contract.js';
export { keyChangesContract, type KeyChangesPair } from './key-changes-contract.js';
export { fileStoreContract, type FileStoreContractOptions } from './file-store-contract.js';
export { blobStoreContract, putFileContract, type BlobStoreWithPutFile } from './blob-store-contract.js';
export { usageStoreContract } from './usage-store-contract.js';
export { adminTokenStoreContract } from './admin-token-store-contract.js';
export { adminSessionStoreContract } from './admin-session-store-contract.js';
export { adminUserStoreContract } from './admin-user-store-contract.js';
export { creationLimiterContract, type LimiterUnderTest } from './creation-limiter-contract.js';
export { modelLimiterContract } from './model-limiter-contract.js';
export { spendLedgerContract } from './spend-ledger-contract.js';
export { accountBudgetStoreContract } from './account-budget-store-contract.js';
export { auditStoreContract } from './audit-store-contract.js';
export { cooldownStoreContract } from './cooldown-store-contract.js';
export { alertClaimsContract } from './alert-claims-contract.js';
export { responseCacheContract } from './response-cache-contract.js';
export { mcpCallStoreContract, mcpGrantStoreContract } from './mcp-store-contract.js';
