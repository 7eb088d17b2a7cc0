import { randomUUID } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { open, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { Writable } from 'node:stream';
import type { Context, Middleware } from 'koa';
import formidable, { errors as formidableErrors, multipart, type File, type Part } from 'formidable';
import { errors, GatewayError } from '../errors/gateway-error.js';
import { lingeringClose } from './lingering-close.js';
import type { ValidatedUpload } from './upload-state.js';

export interface PdfUploadOptions {
  /** The largest PDF accepted, in bytes (the PDF's own bytes, not the multipart envelope). Default: 26,214,400 (25 MiB). */
  maxFileBytes?: number;
  /** Where the PDF is streamed while the request lasts. Default: `os.tmpdir()`. */
  tempDir?: string;
}

/** Room for the boundaries, part headers and small fields around the PDF. */
const ENVELOPE_BYTES = 64 * 1024;
/** `purpose` and the two `expires_after` parts, with room for a few a client adds. */
const MAX_FIELDS = 16;
/**
 * Parts of any kind: the fields, the file, and file parts under other names, which formidable
 * skips without counting them anywhere (hundreds of thousands of tiny ones cost seconds of CPU).
 */
const MAX_PARTS = 32;
const PDF_HEADER = Buffer.from('%PDF-');
const PDF_HEADER_WINDOW = 1024;
const MAX_FILENAME_BYTES = 255;
/** All the header bytes of one part: room for a 255-byte file name in any encoding, many times over. */
const MAX_PART_HEADER_BYTES = 16 * 1024;
const MIN_EXPIRY_SECONDS = 3600;
const MAX_EXPIRY_SECONDS = 2_592_000;

/**
 * The same error, closing the connection (lingering): the rest of the request body is never
 * parsed, so the connection cannot carry another request.
 */
function closing(ctx: Context, err: GatewayError): GatewayError {
  lingeringClose(ctx);
  return new GatewayError(err.status, err.type, err.code, err.message, { ...err.headers, Connection: 'close' });
}

function hasCode(err: unknown): err is { code: unknown } {
  return typeof err === 'object' && err !== null && 'code' in err;
}

/**
 * formidable's errors carry an `httpCode` Koa never reads: each gets its row here. Every one of
 * them leaves the body unread, so the answer closes the connection.
 */
function fromFormidable(ctx: Context, err: unknown): unknown {
  if (err instanceof GatewayError) return closing(ctx, err);
  const code = hasCode(err) ? err.code : undefined;
  switch (code) {
    case formidableErrors.biggerThanTotalMaxFileSize:
    case formidableErrors.biggerThanMaxFileSize:
      return closing(ctx, errors.fileTooLarge());
    case formidableErrors.maxFilesExceeded:
      return closing(ctx, errors.missingFile());
    case formidableErrors.maxFieldsExceeded:
    case formidableErrors.maxFieldsSizeExceeded:
      return closing(ctx, errors.requestTooLarge());
    case formidableErrors.missingMultipartBoundary:
      return closing(ctx, errors.invalidContentType('multipart/form-data with a boundary'));
    case formidableErrors.malformedMultipart:
    case formidableErrors.unknownTransferEncoding:
    case formidableErrors.filenameNotString:
      return closing(ctx, errors.invalidRequest('The multipart body could not be parsed'));
    case formidableErrors.aborted:
      // Nobody is left to answer; a 4xx keeps a client's abort out of the server's error log.
      return errors.invalidRequest('The client aborted the upload');
    default:
      // Unexpected (a disk error): answered as it is, the connection still closed.
      lingeringClose(ctx);
      return err;
  }
}

/** What formidable's multipart parser emits: one event per piece of the body. */
interface ParserEvent {
  name: string;
  start?: number;
  end?: number;
}

/**
 * Caps the header bytes of every part. formidable gathers a part's headers without limit, then
 * runs a backtracking regular expression over them whose time grows with the square of their
 * length (a 300 KB header holds the event loop for seconds). This listener runs before formidable's
 * own: once a part goes over, `onOver` fails the form and every later event is renamed to one
 * formidable ignores, so no header longer than the cap ever reaches that expression.
 */
function capPartHeaders(parser: EventEmitter, onOver: () => void): void {
  let headerBytes = 0;
  let over = false;
  parser.prependListener('data', (event: ParserEvent) => {
    if (!over) {
      if (event.name === 'partBegin') headerBytes = 0;
      if (event.name === 'headerField' || event.name === 'headerValue') headerBytes += (event.end ?? 0) - (event.start ?? 0);
      if (headerBytes <= MAX_PART_HEADER_BYTES) return;
      over = true;
      onOver();
    }
    event.name = 'dropped';
  });
}

/** The base name only: directory parts a client sends are never honoured. */
function baseName(name: string): string {
  return name.slice(Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\')) + 1);
}

function isSaneFilename(name: string): boolean {
  const bytes = Buffer.byteLength(name);
  return name.endsWith('.pdf') && bytes >= 1 && bytes <= MAX_FILENAME_BYTES && !/\p{Cc}/u.test(name);
}

/** `expires_after[seconds]`, null for no expiry; throws unless both parts or neither are valid. */
function expiresAfterSeconds(anchor: string[] | undefined, seconds: string[] | undefined): number | null {
  if (anchor === undefined && seconds === undefined) return null;
  const [anchorValue, ...moreAnchors] = anchor ?? [];
  const [secondsValue, ...moreSeconds] = seconds ?? [];
  if (anchorValue !== 'created_at' || moreAnchors.length > 0 || moreSeconds.length > 0) throw errors.invalidExpiresAfter();
  if (secondsValue === undefined || !/^[0-9]{1,10}$/.test(secondsValue)) throw errors.invalidExpiresAfter();
  const value = Number(secondsValue);
  if (value < MIN_EXPIRY_SECONDS || value > MAX_EXPIRY_SECONDS) throw errors.invalidExpiresAfter();
  return value;
}

async function startsLikePdf(path: string): Promise<boolean> {
  const handle = await open(path, 'r');
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(PDF_HEADER_WINDOW), 0, PDF_HEADER_WINDOW, 0);
    return buffer.subarray(0, bytesRead).includes(PDF_HEADER);
  } finally {
    await handle.close();
  }
}

/** Waits until the stream's file is closed (an open still in flight would recreate it), then removes it. */
async function removeTempFile(stream: WriteStream): Promise<void> {
  if (!stream.closed) {
    // 'close' also follows an 'error', which once() would reject on.
    await new Promise<void>((resolve) => {
      stream.once('close', () => resolve());
      stream.destroy();
    });
  }
  await unlink(stream.path).catch((err: unknown) => {
    if (!hasCode(err) || err.code !== 'ENOENT') throw err;
  });
}

function validate(fields: formidable.Fields, files: formidable.Files): Omit<ValidatedUpload, 'path'> & { file: File } {
  const parts = files.file ?? [];
  const [file] = parts;
  if (file === undefined || parts.length !== 1) throw errors.missingFile();
  if (fields.purpose?.length !== 1 || fields.purpose[0] !== 'user_data') throw errors.invalidPurpose();
  const expires = expiresAfterSeconds(fields['expires_after[anchor]'], fields['expires_after[seconds]']);
  const filename = baseName(file.originalFilename ?? '');
  if (!isSaneFilename(filename)) throw errors.invalidFileName();
  return { file, filename, bytes: file.size, expiresAfterSeconds: expires };
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
  if (!Number.isSafeInteger(maxFileBytes) || maxFileBytes < 1) {
    throw new TypeError('koa-model-gateway: pdfUpload maxFileBytes must be a positive integer');
  }
  if (typeof tempDir !== 'string' || tempDir === '') {
    throw new TypeError('koa-model-gateway: pdfUpload tempDir must be a directory path');
  }
  const maxBodyBytes = maxFileBytes + ENVELOPE_BYTES;

  async function parse(ctx: Context, tempFiles: WriteStream[]): Promise<[formidable.Fields, formidable.Files]> {
    let failed = false;
    const form = formidable({
      enabledPlugins: [multipart],
      uploadDir: tempDir,
      filename: () => `kmg-upload-${randomUUID()}`,
      fileWriteStreamHandler: (file) => {
        // After a failure formidable still parses what it had buffered: nothing more reaches the
        // disk, where the cleanup (already run) would miss it.
        if (failed) return new Writable({ write: (_chunk, _encoding, done) => done() });
        // formidable always passes the file; its types do not say so.
        const stream = createWriteStream((file as unknown as File).filepath, { flags: 'wx' });
        tempFiles.push(stream);
        return stream;
      },
      filter: (part) => part.name === 'file',
      maxFiles: 1,
      maxFileSize: maxFileBytes,
      // maxFileSize is checked only when a part ends; the total is checked on every chunk.
      maxTotalFileSize: maxFileBytes,
      maxFields: MAX_FIELDS,
      maxFieldsSize: ENVELOPE_BYTES,
      allowEmptyFiles: true,
      minFileSize: 0,
    });
    form.once('error', () => {
      failed = true;
    });
    // Parser events may arrive after a pause, outside formidable's try/catch: fail, never throw.
    const fail = (err: GatewayError) => (form as unknown as { _error(err: unknown): void })._error(err);
    let parts = 0;
    form.onPart = (part: Part) => {
      parts += 1;
      if (parts > MAX_PARTS) return fail(errors.requestTooLarge());
      // A part with a file name is a file even when the client sent no Content-Type for it
      // (formidable would read it into memory as a field).
      if (part.originalFilename !== null && !part.mimetype) part.mimetype = 'application/octet-stream';
      return form._handlePart(part);
    };
    // The whole body, envelope included, is counted per chunk: a throw here lands in formidable's
    // own error path (its 'data' handler catches it), which stops parsing and rejects parse().
    // The parser exists from the first chunk on, and gets that chunk only after this event.
    let capped = false;
    form.on('progress', (received) => {
      if (received > maxBodyBytes) throw errors.fileTooLarge();
      const parser = (form as unknown as { _parser: EventEmitter | null })._parser;
      if (capped || parser === null) return;
      capped = true;
      capPartHeaders(parser, () => fail(errors.requestTooLarge()));
    });
    return form.parse(ctx.req);
  }

  return async function pdfUpload(ctx, next) {
    if (ctx.get('Content-Encoding') !== '') throw closing(ctx, errors.unsupportedContentEncoding());
    if (ctx.request.type.trim().toLowerCase() !== 'multipart/form-data') {
      throw closing(ctx, errors.invalidContentType('multipart/form-data'));
    }
    const declared = ctx.request.length;
    if (declared !== undefined && declared > maxBodyBytes) throw closing(ctx, errors.fileTooLarge());

    const tempFiles: WriteStream[] = [];
    try {
      let parsed: [formidable.Fields, formidable.Files];
      try {
        parsed = await parse(ctx, tempFiles);
      } catch (err) {
        throw fromFormidable(ctx, err);
      }
      const { file, ...upload } = validate(...parsed);
      if (!(await startsLikePdf(file.filepath))) throw errors.invalidFileFormat();
      ctx.state.upload = { path: file.filepath, ...upload };
      await next();
    } finally {
      await Promise.all(tempFiles.map(removeTempFile));
    }
  };
}
