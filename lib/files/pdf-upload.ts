import type { WriteStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Context, Middleware } from 'koa';
import { errors } from '../errors/gateway-error.js';
import { isPrintableText } from '../printable-text.js';
import { closing, readMultipartForm, removeTempFile, type MultipartForm } from './multipart-form.js';
import { openAIUploadFields, type UploadFields } from './upload-fields.js';
import type { ValidatedUpload } from '../state.js';

export interface PdfUploadOptions {
  /** The largest PDF accepted, in bytes (the PDF's own bytes, not the multipart envelope). Default: 26,214,400 (25 MiB). */
  maxFileBytes?: number;
  /** Where the PDF is streamed while the request lasts. Default: `os.tmpdir()`. */
  tempDir?: string;
  /**
   * How the request's form fields other than `file` are read: `anthropicUploadFields` for
   * Anthropic's form, or your own. Default: `openAIUploadFields` for every request (api.md's
   * `purpose` and `expires_after`).
   */
  uploadFields?: (ctx: Context) => UploadFields;
}

/**
 * Room for the boundaries, part headers and small fields around the PDF; also the most all fields
 * may hold together.
 */
const ENVELOPE_BYTES = 64 * 1024;
const PDF_HEADER = Buffer.from('%PDF-');
const PDF_HEADER_WINDOW = 1024;
const MAX_FILENAME_BYTES = 255;

/** The base name only: directory parts a client sends are never honoured. */
function baseName(name: string): string {
  return name.slice(Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\')) + 1);
}

function isSaneFilename(name: string): boolean {
  const bytes = Buffer.byteLength(name);
  return name.endsWith('.pdf') && bytes >= 1 && bytes <= MAX_FILENAME_BYTES && isPrintableText(name);
}

/** decisions.md: a PDF has the `%PDF-` header in its first 1,024 bytes. */
async function startsLikePdf(path: string): Promise<boolean> {
  const handle = await open(path, 'r');
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(PDF_HEADER_WINDOW), 0, PDF_HEADER_WINDOW, 0);
    return buffer.subarray(0, bytesRead).includes(PDF_HEADER);
  } finally {
    await handle.close();
  }
}

/** The file name as sent: browsers and fetch send a `"` in it as `%22`. Only the base name is kept. */
function fileNameOf(sent: string): string {
  return baseName(sent.replaceAll('%22', '"'));
}

function validate({ fields, file }: MultipartForm, uploadFields: UploadFields): ValidatedUpload {
  if (file === undefined) throw errors.missingFile();
  const expires = uploadFields(fields);
  const filename = fileNameOf(file.filename);
  if (!isSaneFilename(filename)) throw errors.invalidFileName();
  return { path: file.path, filename, bytes: file.bytes, expiresAfterSeconds: expires };
}

/**
 * Receives a PDF upload (api.md section 4, POST /v1/files): streams the `file` part to a temp file
 * as it arrives, never whole into memory, checks every rule of decisions.md, puts the result on
 * `ctx.state.upload` and removes the temp file once the rest of the chain is done.
 *
 * Refused before a byte is read: a `Content-Encoding` (415, never decompressed), a body that is not
 * `multipart/form-data` (400), a `Content-Length` that already says too much (413). A body that
 * grows past the limit while streaming is cut off at the chunk that crosses it (413). Answers that
 * leave the body unread close the connection. A rejected or aborted upload leaves no temp file.
 * @example router.post('/v1/files', requireScope('files:write'), pdfUpload({ tempDir: '/var/tmp/uploads' }), createFile)
 */
export function pdfUpload(options: PdfUploadOptions = {}): Middleware {
  const maxFileBytes = options.maxFileBytes ?? 26_214_400;
  const tempDir = options.tempDir ?? tmpdir();
  const uploadFields = options.uploadFields ?? (() => openAIUploadFields);
  if (!Number.isSafeInteger(maxFileBytes) || maxFileBytes < 1) {
    throw new TypeError('koa-model-gateway: pdfUpload(): maxFileBytes must be a positive integer');
  }
  if (typeof tempDir !== 'string' || tempDir === '') {
    throw new TypeError('koa-model-gateway: pdfUpload(): tempDir must be a directory path');
  }
  if (typeof uploadFields !== 'function') throw new TypeError('koa-model-gateway: pdfUpload(): uploadFields must be a function of ctx');
  const maxBodyBytes = maxFileBytes + ENVELOPE_BYTES;

  return async function pdfUpload(ctx, next) {
    if (ctx.get('Content-Encoding') !== '') throw closing(errors.unsupportedContentEncoding());
    if (ctx.request.type.trim().toLowerCase() !== 'multipart/form-data') {
      throw closing(errors.invalidContentType('multipart/form-data'));
    }
    const declared = ctx.request.length;
    if (declared !== undefined && declared > maxBodyBytes) throw closing(errors.fileTooLarge());

    const tempFiles: WriteStream[] = [];
    try {
      const form = await readMultipartForm(ctx, { fileField: 'file', tempDir, maxFileBytes, maxBodyBytes, maxFieldBytes: ENVELOPE_BYTES }, tempFiles);
      const upload = validate(form, uploadFields(ctx));
      if (!(await startsLikePdf(upload.path))) throw errors.invalidFileFormat();
      ctx.state.upload = upload;
      await next();
    } finally {
      await Promise.all(tempFiles.map(removeTempFile));
    }
  };
}
