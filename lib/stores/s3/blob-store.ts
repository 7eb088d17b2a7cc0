import { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { StoreUnavailableError } from '../../errors/gateway-error.js';
import type { BlobInfo, BlobStore } from '../../files/blob-store.js';
import { isFileId } from '../../files/file-id.js';

export interface S3BlobStoreOptions {
  /** The client, built by the caller with its region, credentials and endpoint; the caller destroys it. */
  client: S3Client;
  bucket: string;
  /** Put before every id to make the object key: `'gateway/files/'` keeps blobs in that folder. Default `''`. */
  prefix?: string;
  /**
   * Bytes per part of a multipart upload. Default 5 MiB, the least S3 accepts; a blob up to this
   * size is sent in one PutObject.
   */
  partSize?: number;
  /** Parts of one upload sent at once. Default 2. An upload holds about `partSize * (queueSize + 1)` bytes. */
  queueSize?: number;
  /**
   * How long one request to the bucket may wait for its answer, in milliseconds: a HEAD, DELETE or
   * list page, a download until its headers, each request of an upload (its PutObject, or each
   * part and the completion), the SDK's retries included. Past it the request is aborted and the
   * call fails with a `StoreUnavailableError` (503 `service_unavailable`). A download's body then
   * streams at its reader's pace: bound its silences with the client's
   * `requestHandler: { socketTimeout }`. Default: 10000.
   */
  timeoutMs?: number;
}

const MIN_PART_SIZE = 5 * 1024 * 1024;
const DEFAULT_S3_TIMEOUT_MS = 10_000;

/**
 * Runs `send` with a signal that aborts it at `timeoutMs`; the signal is lifted once `send`
 * resolves, so that a download's body is not cut at the deadline. An abort fails as
 * `StoreUnavailableError`.
 */
async function withinTimeout<T>(timeoutMs: number, send: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  try {
    return await send(deadline.signal);
  } catch (err) {
    if (deadline.signal.aborted) throw new StoreUnavailableError(`the S3 store did not answer within ${timeoutMs} ms`, { cause: err, store: 's3' });
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `client`, each request it sends bounded by `timeoutMs`: ours, and lib-storage's Upload's
 * (PutObject, each part, the completion, the abort), which it sends with no signal of its own.
 */
function boundedClient(client: S3Client, timeoutMs: number): S3Client {
  const send = (command: Parameters<S3Client['send']>[0]) => withinTimeout(timeoutMs, (abortSignal) => client.send(command, { abortSignal }));
  return new Proxy(client, { get: (target, property) => (property === 'send' ? send : Reflect.get(target, property)) });
}

interface SdkError {
  name?: string;
  $fault?: 'client' | 'server';
  $metadata?: { httpStatusCode?: number };
}

/**
 * An answer that never came (a network failure, a timeout) or a server-side failure that outlasted
 * the SDK's retries (500, 503 SlowDown) means the store is unavailable: a 503, not a 500. Anything
 * else (access denied, no such bucket) is a fault of the deployment and stays as it is.
 */
function unavailableOr(err: unknown): unknown {
  const { $fault, $metadata } = (err ?? {}) as SdkError;
  if ($metadata && ($metadata.httpStatusCode === undefined || $fault === 'server')) {
    return new StoreUnavailableError('the S3 store is unavailable', { cause: err, store: 's3' });
  }
  return err;
}

const isMissing = (err: unknown, name: string) => (err as SdkError | undefined)?.name === name;

function checkId(id: string): void {
  if (!isFileId(id)) throw new TypeError(`koa-model-gateway: not a file id: ${JSON.stringify(id)}`);
}

/**
 * BlobStore on an S3-compatible object store (AWS S3, MinIO, Cloudflare R2, Ceph RGW), one object
 * per id under `prefix`. Writes stream through `@aws-sdk/lib-storage`: one PutObject up to
 * `partSize`, else a multipart upload of `queueSize` parts at a time, so memory does not grow with
 * the file. S3 publishes an object only once it is complete, and a failed multipart upload is
 * aborted, so a blob appears whole or not at all. Reads stream the object's body.
 * A process killed mid-upload leaves its parts in the bucket, invisible and billed: give the
 * bucket a lifecycle rule that aborts incomplete multipart uploads (docs/DEPLOYMENT.md).
 * @example
 * const blobs = new S3BlobStore({ client: new S3Client({ region: 'eu-west-1' }), bucket: 'acme-gateway', prefix: 'files/' });
 * await blobs.ping(); // the bucket answers
 */
export class S3BlobStore implements BlobStore {
  // The caller's client, each request bounded by `timeoutMs`.
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #partSize: number;
  readonly #queueSize: number;

  constructor(options: S3BlobStoreOptions) {
    const { client, bucket, prefix = '', partSize = MIN_PART_SIZE, queueSize = 2, timeoutMs = DEFAULT_S3_TIMEOUT_MS } = options;
    if (typeof client?.send !== 'function') throw new TypeError('koa-model-gateway: S3BlobStore needs an S3Client as `client`');
    if (typeof bucket !== 'string' || bucket === '') throw new TypeError('koa-model-gateway: S3BlobStore needs a bucket');
    if (typeof prefix !== 'string') throw new TypeError('koa-model-gateway: S3BlobStore prefix must be a string');
    if (!Number.isSafeInteger(partSize) || partSize < MIN_PART_SIZE) {
      throw new TypeError(`koa-model-gateway: S3BlobStore partSize must be an integer of at least ${MIN_PART_SIZE} (5 MiB)`);
    }
    if (!Number.isSafeInteger(queueSize) || queueSize < 1) {
      throw new TypeError('koa-model-gateway: S3BlobStore queueSize must be a positive integer');
    }
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
      throw new TypeError('koa-model-gateway: S3BlobStore timeoutMs must be a positive integer of milliseconds');
    }
    this.#client = boundedClient(client, timeoutMs);
    this.#bucket = bucket;
    this.#prefix = prefix;
    this.#partSize = partSize;
    this.#queueSize = queueSize;
  }

  #key(id: string): string {
    return this.#prefix + id;
  }

  async put(id: string, body: Readable): Promise<number> {
    checkId(id);
    let bytes = 0;
    // Kept to tell the body's own failure (a client gone mid-upload) from the store's.
    let bodyError: unknown;
    const source = Readable.from(
      (async function* counted() {
        try {
          for await (const chunk of body) {
            const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
            bytes += buffer.length;
            yield buffer;
          }
        } catch (err) {
          bodyError = err;
          throw err;
        }
      })(),
    );
    const upload = new Upload({
      client: this.#client,
      params: { Bucket: this.#bucket, Key: this.#key(id), Body: source },
      partSize: this.#partSize,
      queueSize: this.#queueSize,
    });
    try {
      await upload.done();
    } catch (err) {
      source.destroy();
      throw bodyError ?? unavailableOr(err);
    }
    return bytes;
  }

  async get(id: string): Promise<Readable | undefined> {
    if (!isFileId(id)) return undefined;
    try {
      const { Body } = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: this.#key(id) }));
      // In Node the SDK's body is an http.IncomingMessage: a Readable.
      return Body as Readable;
    } catch (err) {
      if (isMissing(err, 'NoSuchKey')) return undefined;
      throw unavailableOr(err);
    }
  }

  async delete(id: string): Promise<void> {
    if (!isFileId(id)) return;
    try {
      // S3 answers 204 for a key that is not there.
      await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: this.#key(id) }));
    } catch (err) {
      throw unavailableOr(err);
    }
  }

  async has(id: string): Promise<boolean> {
    if (!isFileId(id)) return false;
    try {
      await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: this.#key(id) }));
      return true;
    } catch (err) {
      // A HEAD answer has no body: a missing key is only its 404.
      if (isMissing(err, 'NotFound')) return false;
      throw unavailableOr(err);
    }
  }

  /** Every blob directly under the prefix (ListObjectsV2, a page at a time); other keys are skipped. */
  async *list(): AsyncIterable<BlobInfo> {
    let token: string | undefined;
    do {
      let page;
      try {
        page = await this.#client.send(new ListObjectsV2Command({ Bucket: this.#bucket, Prefix: this.#prefix, Delimiter: '/', ContinuationToken: token }));
      } catch (err) {
        throw unavailableOr(err);
      }
      for (const { Key, LastModified } of page.Contents ?? []) {
        const id = Key?.slice(this.#prefix.length) ?? '';
        if (isFileId(id) && LastModified) yield { id, createdAt: Math.floor(LastModified.getTime() / 1000) };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /** Resolves when the bucket answers (HeadBucket): for readiness probes. */
  async ping(): Promise<void> {
    try {
      await this.#client.send(new HeadBucketCommand({ Bucket: this.#bucket }));
    } catch (err) {
      throw unavailableOr(err);
    }
  }
}
