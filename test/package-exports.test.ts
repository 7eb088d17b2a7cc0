import test from 'ava';
import * as root from '../lib/index.js';

// The package root is its public API: what is here, users may depend on, so nothing internal
// (body renderers, error mapping, request-id helpers, stream events) is exported by accident.
test('the package root exports the middleware, stores interfaces and helpers users need, and nothing internal', (t) => {
  t.deepEqual(Object.keys(root).sort(), [
    'DEFAULT_CREATION_LIMITS',
    'DEFAULT_FILE_LIMITS',
    'GatewayError',
    'MemoryCreationLimiter',
    'PROVIDER_KINDS',
    'SCOPES',
    'StoreUnavailableError',
    'anthropicErrors',
    'anthropicProvider',
    'apiKey',
    'cachedKeyStore',
    'chatCompletions',
    'createApiKey',
    'createProvider',
    'echoProvider',
    'errors',
    'extractApiKey',
    'fileObject',
    'fileQuota',
    'filesRouter',
    'generateApiKey',
    'hashApiKey',
    'isFileId',
    'isScope',
    'listModels',
    'messages',
    'modelAccess',
    'newFileId',
    'openAIErrors',
    'openAIProvider',
    'pdfUpload',
    'requireScope',
    'sendPdf',
    'sweep',
    'usageRecorder',
    'usageReport',
    'validateCatalog',
    'validateModels',
    'verifiedKey',
    'visibleModels',
  ]);
});
