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
    'gatewayErrors',
    'generateApiKey',
    'hashApiKey',
    'isFileId',
    'isScope',
    'listModels',
    'messages',
    'modelAccess',
    'modelsRouter',
    'newFileId',
    'openAIErrors',
    'openAIProvider',
    'pdfUpload',
    'providerRegistry',
    'requireScope',
    'sendPdf',
    'sweep',
    'underPath',
    'verifiedKey',
    'visibleModels',
  ]);
});
