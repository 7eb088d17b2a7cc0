import { randomUUID } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { open, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Busboy, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import type { Context, Middleware } from 'koa';
import { errors, GatewayError } from '../errors/gateway-error.js';
import { isPrintableText } from '../printable-text.js';
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
/** `purpose` and the two `expires_after` parts, with room for a few a client adds. */
const MAX_FIELDS = 16;
/** Parts of any kind: the fields, the file, and file parts under other names (skipped, but counted). */
const MAX_PARTS = 32;
const PDF_HEADER = Buffer.from('%PDF-');
const PDF_HEADER_WINDOW = 1024;
const MAX_FILENAME_BYTES = 255;
/**
 * All the header bytes of one part: room for a 255-byte file name in any encoding, many times
 * over. What is beyond is dropped.
 */
const MAX_PART_HEADER_BYTES = 16 * 1024;
/**
 * Once the whole body has arrived, busboy has only what it holds left to parse, in memory, in
 * ticks: a parse that moves no byte in this long, with no write to disk pending, has stalled.
 * @fastify/busboy 3.2.6 never finishes a body whose part that is not form-data carries more than
 * 16 KiB in the chunk that also closes the body.
 */
const STALL_CHECK_MS = 500;
const TEMP_NAME_PREFIX = 'kmg-upload-';
const TEMP_NAME = /^kmg-upload-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * True for the name of a temp file `pdfUpload()` streams an upload to: what a sweep of its
 * `tempDir` may remove, and nothing else.
 * @example if (isUploadTempName(entry.name)) await rm(join(dir, entry.name))
 */
export function isUploadTempName(name: string): boolean {
  return TEMP_NAME.test(name);
}

/**
 * The same error, closing the connection: the rest of the request body is never parsed, so the
 * connection cannot carry another request. The formatter reads that rest first when it is still
 * on its way (`lingeringClose`), so that the client reads the answer.
 */
function closing(err: GatewayError): GatewayError {
  return new GatewayError(err.status, err.type, err.code, err.message, { ...err.headers, Connection: 'close' });
}

function hasCode(err: unknown): err is { code: unknown } {
  return typeof err === 'object' && err !== null && 'code' in err;
}

/** What the multipart body held: its fields by name, and the `file` part, streamed to disk. */
interface ParsedForm {
  fields: Map<string, string[]>;
  file?: { path: string; filename: string; bytes: number };
}

/** The base name only: directory parts a client sends are never honoured. */
function baseName(name: string): string {
  return name.slice(Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\')) + 1);
}

function isSaneFilename(name: string): boolean {
  const bytes = Buffer.byteLength(name);
  return name.endsWith('.pdf') && bytes >= 1 && bytes <= MAX_FILENAME_BYTES && isPrintableText(name);
}

/**
 * Reads and drops a part nobody keeps. Its error (the body ended inside it) is the body's, which
 * busboy reports as well; unhandled, it would end the process.
 */
function discard(part: Readable): void {
  part.on('error', () => undefined);
  part.resume();
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

/** The file name as sent: browsers and fetch send a `"` in it as `%22`. Only the base name is kept. */
function fileNameOf(sent: string): string {
  return baseName(sent.replaceAll('%22', '"'));
}

function validate({ fields, file }: ParsedForm, uploadFields: UploadFields): ValidatedUpload {
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
    throw new TypeError('koa-model-gateway: pdfUpload maxFileBytes must be a positive integer');
  }
  if (typeof tempDir !== 'string' || tempDir === '') {
    throw new TypeError('koa-model-gateway: pdfUpload tempDir must be a directory path');
  }
  if (typeof uploadFields !== 'function') throw new TypeError('koa-model-gateway: pdfUpload uploadFields must be a function of ctx');
  const maxBodyBytes = maxFileBytes + ENVELOPE_BYTES;

  /**
   * Streams the body through busboy: the fields into memory, the one `file` part to a temp file
   * (on `tempFiles` from its creation on, for the cleanup). Rejects with the answer to give; every
   * refusal that leaves the body unread closes the connection.
   */
  async function parse(ctx: Context, tempFiles: WriteStream[]): Promise<ParsedForm> {
    const { req } = ctx;
    let busboy: BusboyInstance;
    try {
      busboy = Busboy({
        headers: req.headers as BusboyHeaders,
        // A part with a file name is a file, whatever its Content-Type; one without is a field.
        isPartAFile: (_name, _type, filename) => filename !== undefined,
        // fileNameOf() keeps the base name, of Windows paths too.
        preservePath: true,
        limits: {
          fileSize: maxFileBytes,
          fields: MAX_FIELDS,
          fieldSize: ENVELOPE_BYTES,
          parts: MAX_PARTS,
          headerSize: MAX_PART_HEADER_BYTES,
        },
      });
    } catch {
      // The Content-Type names no boundary.
      throw closing(errors.invalidContentType('multipart/form-data with a boundary'));
    }
    return new Promise((resolve, reject) => {
      const form: ParsedForm = { fields: new Map() };
      let settled = false;
      let fieldBytes = 0;
      let bodyBytes = 0;
      let written = Promise.resolve();
      /** Stops parsing, once: false if it had already stopped. */
      const stop = () => {
        if (settled) return false;
        settled = true;
        clearInterval(stallCheck);
        // This pauses the request; the formatter reads the rest (lingeringClose).
        req.unpipe(busboy);
        return true;
      };
      const refuse = (err: GatewayError) => {
        if (stop()) reject(closing(err));
      };
      let out: WriteStream | undefined;
      // Bounds the parse once the body is in (Node says so only through `req.complete`).
      let movedBefore = -1;
      const stallCheck = setInterval(() => {
        if (!req.complete || (out !== undefined && out.writableLength > 0)) return;
        const moved = bodyBytes + (out?.bytesWritten ?? 0);
        if (moved === movedBefore) refuse(errors.invalidRequest('The multipart body could not be parsed'));
        movedBefore = moved;
      }, STALL_CHECK_MS).unref();

      // The whole body, envelope included, is counted per chunk: the one that crosses the limit is
      // the last parsed.
      req.on('data', (chunk: Buffer) => {
        bodyBytes += chunk.length;
        if (bodyBytes > maxBodyBytes) refuse(errors.fileTooLarge());
      });
      // The body stopped before its end reached busboy: the client left, or Node's parser dropped
      // the connection (bytes beyond the Content-Length), discarding what the request still
      // buffered. Busboy would wait for ever. Nobody is left to answer; a 4xx keeps it out of the
      // server's error log.
      req.once('close', () => {
        if (!req.readableEnded && stop()) reject(errors.invalidRequest('The client aborted the upload'));
      });

      busboy.on('field', (name, value, _nameTruncated, valueTruncated) => {
        fieldBytes += Buffer.byteLength(value);
        if (valueTruncated || fieldBytes > ENVELOPE_BYTES) return refuse(errors.requestTooLarge());
        const values = form.fields.get(name);
        if (values) values.push(value);
        else form.fields.set(name, [value]);
      });
      busboy.on('fieldsLimit', () => refuse(errors.requestTooLarge()));
      busboy.on('partsLimit', () => refuse(errors.requestTooLarge()));
      busboy.on('file', (name, stream, filename) => {
        if (settled || name !== 'file') return discard(stream);
        if (form.file) {
          discard(stream);
          return refuse(errors.missingFile());
        }
        const path = join(tempDir, `${TEMP_NAME_PREFIX}${randomUUID()}`);
        const temp = createWriteStream(path, { flags: 'wx' });
        out = temp;
        tempFiles.push(temp);
        const file = { path, filename, bytes: 0 };
        form.file = file;
        stream.once('limit', () => refuse(errors.fileTooLarge()));
        written = pipeline(stream, temp).then(
          () => {
            file.bytes = temp.bytesWritten;
          },
          (err: unknown) => {
            // A disk error is answered as it is (500); a part cut short is the body's fault.
            if (!temp.errored) return refuse(errors.invalidRequest('The multipart body could not be parsed'));
            if (!stop()) return;
            // The formatter keeps it on the 500 it makes of `err`.
            ctx.set('Connection', 'close');
            reject(err);
          },
        );
      });
      // Busboy may report one broken body more than once.
      busboy.on('error', () => refuse(errors.invalidRequest('The multipart body could not be parsed')));
      busboy.once('finish', () => {
        void written.then(() => {
          if (stop()) resolve(form);
        });
      });
      req.pipe(busboy);
    });
  }

  return async function pdfUpload(ctx, next) {
    if (ctx.get('Content-Encoding') !== '') throw closing(errors.unsupportedContentEncoding());
    if (ctx.request.type.trim().toLowerCase() !== 'multipart/form-data') {
      throw closing(errors.invalidContentType('multipart/form-data'));
    }
    const declared = ctx.request.length;
    if (declared !== undefined && declared > maxBodyBytes) throw closing(errors.fileTooLarge());

    const tempFiles: WriteStream[] = [];
    try {
      const upload = validate(await parse(ctx, tempFiles), uploadFields(ctx));
      if (!(await startsLikePdf(upload.path))) throw errors.invalidFileFormat();
      ctx.state.upload = upload;
      await next();
    } finally {
      await Promise.all(tempFiles.map(removeTempFile));
    }
  };
}
