import type { Readable } from 'node:stream';
import contentDisposition from 'content-disposition';
import type { Context } from 'koa';
import type { FileRecord } from './file-store.js';

/**
 * Sends a stored PDF as decisions.md's download: always `application/pdf` whatever the stored name
 * says, the exact length, never cached, never sniffed or rendered inline, and an attachment name
 * quoted per RFC 6266 with `filename*` for non-ASCII names. Not `ctx.attachment()`: it would take
 * the Content-Type from the name's extension.
 * @example sendPdf(ctx, record, await blobs.get(record.id))
 */
export function sendPdf(ctx: Context, record: FileRecord, body: Readable): void {
  ctx.set({
    'Cache-Control': 'private, no-store',
    'X-Content-Type-Options': 'nosniff',
    'Content-Security-Policy': 'sandbox',
    'Content-Disposition': contentDisposition(record.filename, {
      type: 'attachment',
      // An ASCII `filename`, so every non-ASCII name also gets its exact `filename*`.
      fallback: record.filename.replace(/[^\x20-\x7e]/g, '_'),
    }),
  });
  ctx.type = 'application/pdf';
  ctx.body = body;
  ctx.length = record.bytes;
}
