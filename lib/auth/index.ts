/**
 * `koa-model-gateway/auth`: API keys. The key check (`apiKey()`), scopes (`requireScope()`,
 * `SCOPES`), a key's model allowlist (`modelAccess()`), making and rotating keys (`createApiKey()`, `rotateApiKey()`), the
 * `KeyStore` interface and what wraps one (`cachedKeyStore()`, `announceKeyChanges()`,
 * `keyUseRecorder()`), and `withoutSecrets()` for text a log or a trace takes from a request.
 */
export { SCOPES, isScope, type Scope } from './scopes.js';
export { createApiKey, generateApiKey, hashApiKey, keyStatus, rotateApiKey, type ApiKeyRotation, type KeyStatus } from './keys.js';
export { canonicalAccountName } from './account-name.js';
export { canonicalKeyName } from './key-name.js';
export type { ApiKeyRecord, KeyCache, KeyRevocation, KeyRotation, KeyRotationResult, KeyStore, KeyUpdate, NewApiKey } from './key-store.js';
export { announceKeyChanges, type AnnounceKeyChangesOptions, type KeyChanges } from './key-changes.js';
export { extractApiKey } from './extract-api-key.js';
export { withoutSecrets } from './without-secrets.js';
export { apiKey, verifiedKey, type ApiKeyOptions } from './api-key.js';
export type { VerifiedKey } from '../state.js';
export { requireScope } from './require-scope.js';
export { modelAccess, visibleModels, type ModelAccess } from './model-access.js';
export { cachedKeyStore, type CachedKeyStoreOptions } from './cached-key-store.js';
export { keyUseRecorder, type KeyUseRecorder, type KeyUseRecorderOptions } from './key-use-recorder.js';
