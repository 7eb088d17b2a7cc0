import test from 'ava';
import { filesRouter, type FilesRouterOptions } from '../../lib/files/files-router.js';
import { pdfUpload, type PdfUploadOptions } from '../../lib/files/pdf-upload.js';
import { MemoryBlobStore } from '../../lib/stores/memory/blob-store.js';
import { MemoryFileStore } from '../../lib/stores/memory/file-store.js';

test('filesRouter() refuses missing stores and bad limits when it is made, not at request time', (t) => {
  const files = new MemoryFileStore();
  const blobs = new MemoryBlobStore();
  t.throws(() => filesRouter({ blobs } as unknown as FilesRouterOptions), { instanceOf: TypeError, message: 'koa-model-gateway: filesRouter() needs a FileStore as `files`' });
  t.throws(() => filesRouter({ files } as unknown as FilesRouterOptions), { instanceOf: TypeError, message: 'koa-model-gateway: filesRouter() needs a BlobStore as `blobs`' });
  t.throws(() => filesRouter({ files, blobs, limits: { maxFiles: 0 } }), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: filesRouter limits.maxFiles must be a positive integer',
  });
  t.throws(() => filesRouter({ files, blobs, anthropicShape: true } as unknown as FilesRouterOptions), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: filesRouter() anthropicShape must be a function of ctx',
  });
  t.notThrows(() => filesRouter({ files, blobs }));
});

test('pdfUpload() refuses an uploadFields that is not a function of ctx when it is made', (t) => {
  t.throws(() => pdfUpload({ uploadFields: 'anthropic' } as unknown as PdfUploadOptions), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: pdfUpload uploadFields must be a function of ctx',
  });
});
