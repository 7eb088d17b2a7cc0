import { readFileSync } from 'node:fs';
import test from 'ava';
import * as root from '../lib/index.js';
import type { AnswerFormat, EndpointFormat, StreamedAnswer, TokenUsage } from '../lib/index.js';
import * as memory from '../lib/stores/memory/index.js';
import * as testing from '../lib/testing/index.js';

// The package root is its public API: what is here, users may depend on, so nothing internal
// (error mapping, stream events) is exported by accident. Shape A's body, request ids and the
// lingering time are public for answers written outside the chain (the server's protocol errors).
test('the package root exports the middleware, stores interfaces and helpers users need, and nothing internal', (t) => {
  t.deepEqual(Object.keys(root).sort(), [
    'ACCOUNT_NAME_RULE',
    'AttemptFailedError',
    'DEFAULT_CREATION_LIMITS',
    'DEFAULT_FILE_LIMITS',
    'DEFAULT_RETRY_STATUSES',
    'GatewayError',
    'KEY_NAME_RULE',
    'LINGER_MS',
    'MemoryAccountBudgetStore',
    'MemorySpendLedger',
    'SCOPES',
    'StoreUnavailableError',
    'adminAuth',
    'adminRouter',
    'adminSessions',
    'announceKeyChanges',
    'anthropicErrors',
    'anthropicFileObject',
    'anthropicFileShape',
    'anthropicProvider',
    'anthropicUploadFields',
    'apiKey',
    'auditEntry',
    'auditRouter',
    'auditTrail',
    'budgetPeriods',
    'budgetRefusal',
    'budgetsRouter',
    'cachedAccountBudgets',
    'cachedKeyStore',
    'callCost',
    'canonicalAccountName',
    'canonicalKeyName',
    'chatCompletions',
    'checkModelLimits',
    'countTokens',
    'createAdminToken',
    'createApiKey',
    'createProvider',
    'echoProvider',
    'errors',
    'extractApiKey',
    'fileObject',
    'fileQuota',
    'filesRouter',
    'gatewayErrors',
    'generateApiKey',
    'hashApiKey',
    'isFileId',
    'isScope',
    'isUploadTempName',
    'keyObject',
    'keyStatus',
    'keyUseRecorder',
    'listModels',
    'messages',
    'meterModelCalls',
    'modelAccess',
    'modelLimitRefusal',
    'modelsRouter',
    'newFileId',
    'newRequestId',
    'openAIErrors',
    'openAIFileShape',
    'openAIProvider',
    'openAIUploadFields',
    'pdfUpload',
    'picoOfUsd',
    'priceCatalog',
    'providerRegistry',
    'rateLimitHeaders',
    'requireScope',
    'responses',
    'retrieveModel',
    'rotateApiKey',
    'sendPdf',
    'shapeABody',
    'spendBudgets',
    'spendFromUsage',
    'sweep',
    'tokenPrice',
    'underPath',
    'usageRecorder',
    'usageReport',
    'usdOfPico',
    'verifiedAdmin',
    'verifiedKey',
    'visibleModels',
  ]);
});

test('koa-model-gateway/stores/memory exports every memory implementation, the limiters among them', (t) => {
  t.deepEqual(Object.keys(memory).sort(), [
    'MemoryAdminSessionStore',
    'MemoryAdminTokenStore',
    'MemoryAuditStore',
    'MemoryBlobStore',
    'MemoryCooldownStore',
    'MemoryCreationLimiter',
    'MemoryFileStore',
    'MemoryKeyChanges',
    'MemoryKeyStore',
    'MemoryModelLimiter',
    'MemoryUsageStore',
  ]);
});

test('koa-model-gateway/testing exports the provider contract suite and every store contract suite, and nothing else', (t) => {
  t.deepEqual(Object.keys(testing).sort(), [
    'accountBudgetStoreContract',
    'adminSessionStoreContract',
    'adminTokenStoreContract',
    'auditStoreContract',
    'blobStoreContract',
    'cooldownStoreContract',
    'creationLimiterContract',
    'fileStoreContract',
    'keyChangesContract',
    'keyRotationContract',
    'keyStoreContract',
    'modelLimiterContract',
    'providerContract',
    'putFileContract',
    'spendLedgerContract',
    'usageStoreContract',
  ]);
});

test('every export of package.json names its types before its code, koa-model-gateway/testing among them', (t) => {
  const { exports } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { exports: Record<string, unknown> };
  t.like(exports['./testing'], { types: './dist/lib/testing/index.d.ts', default: './dist/lib/testing/index.js' });
  for (const [path, entry] of Object.entries(exports)) {
    if (typeof entry === 'string') continue;
    const conditions = Object.keys(entry as object);
    t.true(conditions.indexOf('types') < conditions.indexOf('default'), `${path}: types before default`);
  }
});

// Compiling is the test: a format's answer reader written outside lib/ type-checks against the root's types.
test('the format types are exported from the root: AnswerFormat, StreamedAnswer, TokenUsage, EndpointFormat', (t) => {
  const none: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  const reader: StreamedAnswer = { event: (event) => event, usage: none };
  const answer: AnswerFormat = { json: () => none, stream: () => reader };
  const format: Pick<EndpointFormat, 'endpoint' | 'answer'> = { endpoint: 'chatCompletions', answer };
  t.is(format.answer.stream({}, 'm').event('data: {}\n\n'), 'data: {}\n\n');
});
