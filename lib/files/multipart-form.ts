import { randomUUID } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { unlink } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Busboy, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import type { Context } from 'koa';
import { errors, GatewayError } from '../errors/gateway-error.js';

/** `purpose` and the two `expires_after` parts, with room for a few a client adds. */
const MAX_FIELDS = 16;
/** Parts of any kind: the fields, the file, and file parts under other names (skipped, but counted). */
const MAX_PARTS = 32;
/**
 * All the header bytes of one part: room for a 255-byte file name in any encoding, many times
 * over. What is beyond is dropped.
 */
const MAX_PART_HEADER_BYTES = 16 * 1024;
/**
 * Once the whole body has arrived, busboy has only what it holds left to parse, in memory, in
 * ticks: a parse that moves no byte in this long, with nothing left to the disk (a write of the
 * file or its close), has stalled.
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
export function closing(err: GatewayError): GatewayError {
  return new GatewayError(err.status, err.type, err.code, err.message, { ...err.headers, Connection: 'close' });
}

/** What a multipart body held: its fields by name, and the file part, streamed to disk. */
export interface MultipartForm {
  fields: Map<string, string[]>;
  /** `filename` as sent. */
  file?: { path: string; filename: string; bytes: number };
}

export interface MultipartLimits {
  /** The file part's name; file parts under other names are read and dropped. */
  fileField: string;
  /** Where the file part is streamed. */
  tempDir: string;
  maxFileBytes: number;
  /** The whole body, envelope included. */
  maxBodyBytes: number;
  /** The fields' values together; also the most a single field may hold. */
  maxFieldBytes: number;
}

const unparsable = () => errors.invalidRequest('The multipart body could not be parsed');

/**
 * Reads and drops a part nobody keeps. Its error (the body ended inside it) is the body's, which
 * busboy reports as well; unhandled, it would end the process.
 */
function drain(part: Readable): void {
  part.on('error', () => undefined);
  part.resume();
}

function hasCode(err: unknown): err is { code: unknown } {
  return typeof err === 'object' && err !== null && 'code' in err;
}

/** Waits until the stream's file is closed (an open still in flight would recreate it), then removes it. */
export async function removeTempFile(stream: WriteStream): Promise<void> {
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

function openBusboy(req: IncomingMessage, limits: MultipartLimits): BusboyInstance {
  try {
    return Busboy({
      headers: req.headers as BusboyHeaders,
      // A part with a file name is a file, whatever its Content-Type; one without is a field.
      isPartAFile: (_name, _type, filename) => filename !== undefined,
      // The caller keeps the base name, of Windows paths too.
      preservePath: true,
      limits: {
        fileSize: limits.maxFileBytes,
        fields: MAX_FIELDS,
        fieldSize: limits.maxFieldBytes,
        parts: MAX_PARTS,
        headerSize: MAX_PART_HEADER_BYTES,
      },
    });
  } catch {
    // The Content-Type names no boundary.
    throw closing(errors.invalidContentType('multipart/form-data with a boundary'));
  }
}

/**
 * One body's parse through busboy, settled once: with the form, or with the answer to give.
 * Every refusal stops reading the body and closes the connection.
 */
class FormParse {
  readonly done: Promise<MultipartForm>;
  readonly #form: MultipartForm = { fields: new Map() };
  #resolve!: (form: MultipartForm) => void;
  #reject!: (err: unknown) => void;
  #settled = false;
  #bodyBytes = 0;
  #fieldBytes = 0;
  #out: WriteStream | undefined;
  #written = Promise.resolve();
  #stallCheck: NodeJS.Timeout | undefined;

  readonly #ctx: Context;
  readonly #busboy: BusboyInstance;
  readonly #limits: MultipartLimits;
  readonly #tempFiles: WriteStream[];

  constructor(ctx: Context, busboy: BusboyInstance, limits: MultipartLimits, tempFiles: WriteStream[]) {
    this.#ctx = ctx;
    this.#busboy = busboy;
    this.#limits = limits;
    this.#tempFiles = tempFiles;
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  start(): void {
    const { req } = this.#ctx;
    this.#stallCheck = this.#watchForStall(req);
    req.on('data', (chunk: Buffer) => this.#countBody(chunk));
    // The body stopped before its end reached busboy: the client left, or Node's parser dropped
    // the connection (bytes beyond the Content-Length), discarding what the request still
    // buffered. Busboy would wait for ever. Nobody is left to answer; a 4xx keeps it out of the
    // server's error log.
    req.once('close', () => {
      if (!req.readableEnded && this.#stop()) this.#reject(errors.invalidRequest('The client aborted the upload'));
    });
    this.#busboy.on('field', (name, value, _nameTruncated, valueTruncated) => this.#keepField(name, value, valueTruncated));
    this.#busboy.on('fieldsLimit', () => this.#refuse(errors.requestTooLarge()));
    this.#busboy.on('partsLimit', () => this.#refuse(errors.requestTooLarge()));
    this.#busboy.on('file', (name, stream, filename) => this.#keepFile(name, stream, filename));
    // Busboy may report one broken body more than once.
    this.#busboy.on('error', () => this.#refuse(unparsable()));
    this.#busboy.once('finish', () => {
      void this.#written.then(() => {
        if (this.#stop()) this.#resolve(this.#form);
      });
    });
    req.pipe(this.#busboy);
  }

  /** Stops parsing, once: false if it had already stopped. */
  #stop(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    clearInterval(this.#stallCheck);
    // This pauses the request; the formatter reads the rest (lingeringClose).
    this.#ctx.req.unpipe(this.#busboy);
    return true;
  }

  #refuse(err: GatewayError): void {
    if (this.#stop()) this.#reject(closing(err));
  }

  /** Bounds the parse once the body is in (Node says so only through `req.complete`). */
  #watchForStall(req: IncomingMessage): NodeJS.Timeout {
    let movedBefore = -1;
    return setInterval(() => {
      const out = this.#out;
      // The disk still has the file's writes or its close to finish: that is not the parse's stall.
      if (!req.complete || (out !== undefined && !out.closed && (out.writableLength > 0 || out.writableEnded))) return;
      const moved = this.#bodyBytes + (out?.bytesWritten ?? 0);
      if (moved === movedBefore) this.#refuse(unparsable());
      movedBefore = moved;
    }, STALL_CHECK_MS).unref();
  }

  /** The whole body, envelope included, is counted per chunk: the one that crosses the limit is the last parsed. */
  #countBody(chunk: Buffer): void {
    this.#bodyBytes += chunk.length;
    if (this.#bodyBytes > this.#limits.maxBodyBytes) this.#refuse(errors.fileTooLarge());
  }

  #keepField(name: string, value: string, truncated: boolean): void {
    this.#fieldBytes += Buffer.byteLength(value);
    if (truncated || this.#fieldBytes > this.#limits.maxFieldBytes) return this.#refuse(errors.requestTooLarge());
    const values = this.#form.fields.get(name);
    if (values) values.push(value);
    else this.#form.fields.set(name, [value]);
  }

  /** Streams the file part to a temp file, on `tempFiles` from its creation on, for the cleanup; one file part only. */
  #keepFile(name: string, stream: Readable, filename: string): void {
    if (this.#settled || name !== this.#limits.fileField) return drain(stream);
    if (this.#form.file) {
      drain(stream);
      return this.#refuse(errors.missingFile());
    }
    const path = join(this.#limits.tempDir, `${TEMP_NAME_PREFIX}${randomUUID()}`);
    const temp = createWriteStream(path, { flags: 'wx' });
    this.#out = temp;
    this.#tempFiles.push(temp);
    const file = { path, filename, bytes: 0 };
    this.#form.file = file;
    stream.once('limit', () => this.#refuse(errors.fileTooLarge()));
    this.#written = pipeline(stream, temp).then(
      () => {
        file.bytes = temp.bytesWritten;
      },
      (err: unknown) => {
        // A disk error is answered as it is (500); a part cut short is the body's fault.
        if (!temp.errored) return this.#refuse(unparsable());
        if (!this.#stop()) return;
        // The formatter keeps it on the 500 it makes of `err`.
        this.#ctx.set('Connection', 'close');
        this.#reject(err);
      },
    );
  }
}

/**
 * Streams a `multipart/form-data` body through busboy: the fields into memory, the one file part
 * `limits.fileField` to a temp file in `limits.tempDir` (pushed on `tempFiles` once created, for
 * the caller to remove with `removeTempFile`). Rejects with the answer to give: 400 for a body
 * that cannot be parsed, a second file part or an aborted upload; 413 past a limit. Every refusal
 * that leaves the body unread closes the connection.
 * @example const form = await readMultipartForm(ctx, { fileField: 'file', tempDir, maxFileBytes, maxBodyBytes, maxFieldBytes }, tempFiles)
 */
export function readMultipartForm(ctx: Context, limits: MultipartLimits, tempFiles: WriteStream[]): Promise<MultipartForm> {
  const parse = new FormParse(ctx, openBusboy(ctx.req, limits), limits, tempFiles);
  parse.start();
  return parse.done;
}
