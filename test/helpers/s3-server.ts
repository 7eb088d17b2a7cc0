import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import type { TestFn } from 'ava';
import { gate } from './services.js';

/** What the tests use of s3rver (`@20minutes/s3rver`, which ships no types). */
interface S3rver {
  run(): Promise<{ port: number }>;
  close(): Promise<void>;
}
type S3rverConstructor = new (options: {
  address: string;
  port: number;
  directory: string;
  silent: boolean;
  allowMismatchedSignatures: boolean;
  configureBuckets: Array<{ name: string }>;
}) => S3rver;

const BUCKET = 'kmg-test';
// s3rver's one account.
const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

const freshPrefix = () => `t-${randomBytes(6).toString('hex')}/`;

const serverEnv = (endpoint: string, prefix: string) => ({
  BLOB_URL: `s3://${BUCKET}/${prefix}`,
  S3_ENDPOINT: endpoint,
  S3_FORCE_PATH_STYLE: '1',
  AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
  AWS_REGION: 'us-east-1',
});

export interface S3TestServer {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  port: number;
  bucket: string;
  /** A client of this server; destroyed by `stop`. */
  client(config?: Partial<S3ClientConfig>): S3Client;
  /** A key prefix no other test uses, ending in `/`. */
  freshPrefix(): string;
  /** The reference server's settings for this server's bucket, blobs under `prefix`. */
  env(prefix: string): Record<string, string>;
  stop(): Promise<void>;
}

/**
 * An S3-compatible server (s3rver) on a free loopback port, storing into a temp directory, with
 * one bucket. s3rver checks signatures on object requests, but computes the canonical path of
 * bucket requests without the trailing slash the SDK signs (`/bucket/`), so it would refuse every
 * ListObjectsV2 and HeadBucket: signatures are not checked.
 */
export async function startS3Server(): Promise<S3TestServer> {
  const S3rver = createRequire(import.meta.url)('@20minutes/s3rver') as S3rverConstructor;
  const directory = await mkdtemp(join(tmpdir(), 'kmg-s3-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    directory,
    silent: true,
    allowMismatchedSignatures: true,
    configureBuckets: [{ name: BUCKET }],
  });
  let port: number;
  try {
    ({ port } = await server.run());
  } catch (err) {
    await rm(directory, { recursive: true, force: true });
    throw err;
  }
  const endpoint = `http://127.0.0.1:${port}`;
  const clients: S3Client[] = [];
  return {
    endpoint,
    port,
    bucket: BUCKET,
    client(config = {}) {
      const client = new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials: CREDENTIALS, ...config });
      clients.push(client);
      return client;
    },
    freshPrefix,
    env: (prefix) => serverEnv(endpoint, prefix),
    async stop() {
      for (const client of clients) client.destroy();
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

/**
 * One S3 server for the test file, stopped after its tests; `test` runs only if it started. Call
 * it before declaring any test: AVA takes no test declared after a top-level await.
 * Elsewhere than CI a server that does not start skips the file's S3 tests with one line; with
 * CI=true it fails them.
 */
export async function withS3<T>(test: TestFn<T>): Promise<{ test: TestFn<T>; s3: S3TestServer }> {
  let s3: S3TestServer;
  try {
    s3 = await startS3Server();
  } catch (err) {
    const missing = `the S3 server (s3rver) did not start: ${(err instanceof Error ? err.message : String(err)).split('\n')[0]}`;
    // The tests never run, so nothing reads this.
    return { test: gate(test, 'S3', missing, 'npm install puts s3rver in node_modules'), s3: undefined as never };
  }
  try {
    test.after.always(() => s3.stop());
  } catch (err) {
    // A hook declared too late (after a test): no server or temp directory is left behind.
    await s3.stop();
    throw err;
  }
  return { test, s3 };
}

export interface StoppableS3Server {
  endpoint: string;
  port: number;
  bucket: string;
  /** A client of this server; destroyed by `stop`. */
  client(config?: Partial<S3ClientConfig>): S3Client;
  freshPrefix(): string;
  env(prefix: string): Record<string, string>;
  /** SIGSTOP: the process answers nothing more, while the kernel still accepts its connections. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  stop(): Promise<void>;
}

/** The S3 server of `startS3Server`, in a child process that a test can stop (SIGSTOP) and resume. */
export async function stoppableS3Server(): Promise<StoppableS3Server> {
  const child = spawn(process.execPath, [new URL('./s3-server-child.js', import.meta.url).pathname], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  const [line] = (await Promise.race([once(createInterface({ input: child.stdout }), 'line'), exited])) as [string | undefined];
  if (typeof line !== 'string') throw new Error('the S3 server process exited before it listened');
  const { port } = JSON.parse(line) as { port: number };
  const endpoint = `http://127.0.0.1:${port}`;
  const clients: S3Client[] = [];
  return {
    endpoint,
    port,
    bucket: BUCKET,
    client(config = {}) {
      const client = new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials: CREDENTIALS, ...config });
      clients.push(client);
      return client;
    },
    freshPrefix,
    env: (prefix) => serverEnv(endpoint, prefix),
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    async stop() {
      for (const client of clients) client.destroy();
      child.kill('SIGCONT');
      child.stdin.end();
      await exited;
    },
  };
}
