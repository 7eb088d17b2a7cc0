import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import type { BlobStore } from 'koa-model-gateway/files';
import { FsBlobStore } from 'koa-model-gateway/stores/fs';
import type { S3BlobStore } from 'koa-model-gateway/stores/s3';
import { ConfigError } from './config-error.js';
import type { ServerConfig } from './config.js';
import type { ReadinessCheck } from './health.js';

/** Where the files go when `BLOB_URL=s3://bucket/prefix`: an S3-compatible bucket. */
export interface S3Settings {
  bucket: string;
  /** The key prefix, empty or ending in `/`. */
  prefix: string;
  region: string;
  /** `S3_ENDPOINT` (MinIO, R2, Ceph…), or `null` for AWS S3 itself. */
  endpoint: string | null;
  forcePathStyle: boolean;
  /** From AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN); `null`: the SDK's default chain (profile, instance role…). */
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | null;
}

type Environment = Readonly<Record<string, string | undefined>>;

// S3's rules for bucket names (the strictest of the S3-compatible stores).
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX_SEGMENT = /^[A-Za-z0-9._-]+$/;

function parsePrefix(path: string): string {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  if (trimmed === '') return '';
  for (const segment of trimmed.split('/')) {
    if (!PREFIX_SEGMENT.test(segment) || segment === '.' || segment === '..') {
      throw new ConfigError(`BLOB_URL: the prefix '${trimmed}' must be folder names of letters, digits, '.', '_' and '-' between single slashes`);
    }
  }
  return `${trimmed}/`;
}

function parseEndpoint(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('S3_ENDPOINT must be an http:// or https:// URL such as http://127.0.0.1:9000');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(`S3_ENDPOINT must start with http:// or https://, got '${url.protocol}'`);
  if (url.username !== '' || url.password !== '') {
    throw new ConfigError('S3_ENDPOINT must not hold credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
  }
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    throw new ConfigError(`S3_ENDPOINT must be the server's address only, as in ${url.origin}`);
  }
  return url.origin;
}

function parseFlag(name: string, raw: string | undefined): boolean {
  if (raw === undefined || raw === '' || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new ConfigError(`${name} must be 1 or 0, got '${raw}'`);
}

/**
 * `BLOB_URL=s3://bucket/prefix` with the standard AWS variables (`AWS_REGION` or
 * `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), plus
 * `S3_ENDPOINT` and `S3_FORCE_PATH_STYLE=1` for MinIO-style servers. Unset: `null`, files on disk.
 * Throws a `ConfigError` naming the bad setting; messages never repeat a credential.
 */
export function parseS3Settings(env: Environment): S3Settings | null {
  const raw = env.BLOB_URL || '';
  if (raw === '') {
    for (const name of ['S3_ENDPOINT', 'S3_FORCE_PATH_STYLE']) {
      if (env[name]) throw new ConfigError(`${name} is set but BLOB_URL is not: set BLOB_URL=s3://<bucket>/<prefix> to keep the files in S3`);
    }
    return null;
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(raw)?.[1];
  if (scheme?.toLowerCase() !== 's3') {
    throw new ConfigError(`BLOB_URL must be s3://<bucket>/<prefix>, got ${scheme ? `'${scheme}://'` : 'something else'}`);
  }
  if (env.FILES_DIR) throw new ConfigError('FILES_DIR and BLOB_URL are both set: files are kept in one place, unset one of them');
  const rest = raw.slice(scheme.length + 3);
  const slash = rest.indexOf('/');
  const bucket = slash === -1 ? rest : rest.slice(0, slash);
  if (bucket.includes('@')) throw new ConfigError('BLOB_URL must not hold credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
  if (!BUCKET_NAME.test(bucket)) {
    throw new ConfigError(`BLOB_URL: '${bucket}' is not a bucket name (3 to 63 lower-case letters, digits, '.' and '-')`);
  }
  const prefix = parsePrefix(slash === -1 ? '' : rest.slice(slash + 1));

  const endpoint = env.S3_ENDPOINT ? parseEndpoint(env.S3_ENDPOINT) : null;
  // An S3-compatible server mostly ignores the region but the SDK signs with one: us-east-1, as MinIO's default.
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || (endpoint === null ? '' : 'us-east-1');
  if (region === '') throw new ConfigError("BLOB_URL is an AWS S3 bucket: set AWS_REGION to the bucket's region");
  if (!/^[a-z0-9-]{1,32}$/.test(region)) throw new ConfigError(`AWS_REGION must be a region name such as eu-west-1, got '${region}'`);

  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = env;
  if (Boolean(accessKeyId) !== Boolean(secretAccessKey)) {
    throw new ConfigError(accessKeyId ? 'AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY' : 'AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID');
  }
  const credentials = accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } : null;
  return { bucket, prefix, region, endpoint, forcePathStyle: parseFlag('S3_FORCE_PATH_STYLE', env.S3_FORCE_PATH_STYLE), credentials };
}

/** How long an S3 connection may carry nothing, either way, before it is cut. */
const S3_SOCKET_IDLE_MS = 30_000;

/** Where the settings point, for messages: never a credential. */
const describeBucket = (settings: S3Settings) => `s3://${settings.bucket}/${settings.prefix}${settings.endpoint ? ` at ${settings.endpoint}` : ''}`;

/**
 * The S3BlobStore of the settings, once its bucket answers; `close` destroys its client. The SDK
 * is loaded only here: a server keeping its files on disk never loads it.
 */
async function openS3BlobStore(settings: S3Settings): Promise<{ blobs: S3BlobStore; close(): void }> {
  const [{ S3Client }, { S3BlobStore }] = await Promise.all([import('@aws-sdk/client-s3'), import('koa-model-gateway/stores/s3')]);
  const client = new S3Client({
    region: settings.region,
    forcePathStyle: settings.forcePathStyle,
    ...(settings.endpoint === null ? {} : { endpoint: settings.endpoint }),
    ...(settings.credentials === null ? {} : { credentials: settings.credentials }),
    // Each request waits for its answer for the S3BlobStore's timeoutMs (10 s) at most.
    requestHandler: {
      // A store that does not take the connection fails the request, and the readiness probe, soon.
      connectionTimeout: 5000,
      // A download's body stalled on the bucket's side ends instead of holding its client forever;
      // as long as the slowest reader that the server still serves may pause.
      socketTimeout: S3_SOCKET_IDLE_MS,
      // A download holds its connection while the client reads: the SDK's 50 would queue every
      // request behind 50 slow readers.
      httpAgent: { maxSockets: 1024 },
      httpsAgent: { maxSockets: 1024 },
    },
  });
  const blobs = new S3BlobStore({ client, bucket: settings.bucket, prefix: settings.prefix });
  try {
    await blobs.ping();
  } catch (err) {
    client.destroy();
    const cause = (err as Error).cause as (Error & { code?: string }) | undefined;
    const reason = cause?.code ?? cause?.name ?? (err as Error).name;
    throw new ConfigError(`cannot reach the bucket ${describeBucket(settings)} (${reason})`);
  }
  return { blobs, close: () => client.destroy() };
}

/**
 * The files directory, or with BLOB_URL the bucket (once it answers); `ready` is what `/readyz`
 * asks of it, `close` releases it.
 */
export async function openBlobStore(config: Pick<ServerConfig, 's3' | 'filesDir'>): Promise<{ blobs: BlobStore; ready: ReadinessCheck; close(): void }> {
  if (config.s3) {
    const { blobs, close } = await openS3BlobStore(config.s3);
    return { blobs, ready: () => blobs.ping(), close };
  }
  return {
    blobs: new FsBlobStore({ directory: config.filesDir }),
    ready: () => access(config.filesDir, constants.R_OK | constants.W_OK),
    close: () => undefined,
  };
}
