import anyTest from 'ava';
import { parseS3Settings } from '../../reference-server/blob-config.js';
import { ConfigError } from '../../reference-server/config-error.js';
import { loadConfig } from '../../reference-server/config.js';
import { runCli, tempDataDir } from '../helpers/server-process.js';
import { withS3 } from '../helpers/s3-server.js';

// Declared before any test: AVA takes no test declared after a top-level await.
const { test, s3 } = await withS3(anyTest);

const MINIO = { S3_ENDPOINT: 'http://127.0.0.1:9000', S3_FORCE_PATH_STYLE: '1', AWS_ACCESS_KEY_ID: 'minio', AWS_SECRET_ACCESS_KEY: 'secret-key' };

anyTest('without BLOB_URL the files stay on disk', (t) => {
  t.is(loadConfig({}).s3, null);
  t.is(loadConfig({ AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y' }).s3, null, 'AWS variables alone choose nothing');
});

anyTest('BLOB_URL names the bucket and the prefix; S3_ENDPOINT and S3_FORCE_PATH_STYLE a MinIO-style server', (t) => {
  t.deepEqual(loadConfig({ BLOB_URL: 's3://acme-files/gateway/pdfs/', ...MINIO }).s3, {
    bucket: 'acme-files',
    prefix: 'gateway/pdfs/',
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:9000',
    forcePathStyle: true,
    credentials: { accessKeyId: 'minio', secretAccessKey: 'secret-key' },
  });
  t.like(parseS3Settings({ BLOB_URL: 's3://acme-files', AWS_REGION: 'eu-west-1' }), {
    prefix: '',
    region: 'eu-west-1',
    endpoint: null,
    forcePathStyle: false,
    credentials: null, // the SDK's own chain: a profile, an instance role
  });
  t.like(parseS3Settings({ BLOB_URL: 's3://acme-files/x', AWS_DEFAULT_REGION: 'us-west-2', AWS_ACCESS_KEY_ID: 'a', AWS_SECRET_ACCESS_KEY: 'b', AWS_SESSION_TOKEN: 'c' }), {
    prefix: 'x/',
    region: 'us-west-2',
    credentials: { accessKeyId: 'a', secretAccessKey: 'b', sessionToken: 'c' },
  });
});

// Each: the environment, and what the one line must say.
const badSettings: Array<[Record<string, string>, RegExp]> = [
  [{ BLOB_URL: 'gs://acme-files/x', AWS_REGION: 'eu-west-1' }, /^BLOB_URL must be s3:\/\/<bucket>\/<prefix>, got 'gs:\/\/'$/],
  [{ BLOB_URL: 'acme-files', AWS_REGION: 'eu-west-1' }, /^BLOB_URL must be s3:\/\/<bucket>\/<prefix>, got something else$/],
  [{ BLOB_URL: 's3://Acme_Files/x', AWS_REGION: 'eu-west-1' }, /^BLOB_URL: 'Acme_Files' is not a bucket name/],
  [{ BLOB_URL: 's3:///x', AWS_REGION: 'eu-west-1' }, /^BLOB_URL: '' is not a bucket name/],
  [{ BLOB_URL: 's3://key:secret@acme-files/x', AWS_REGION: 'eu-west-1' }, /^BLOB_URL must not hold credentials/],
  [{ BLOB_URL: 's3://acme-files/a//b', AWS_REGION: 'eu-west-1' }, /^BLOB_URL: the prefix 'a\/\/b' must be folder names/],
  [{ BLOB_URL: 's3://acme-files/../b', AWS_REGION: 'eu-west-1' }, /^BLOB_URL: the prefix '\.\.\/b' must be folder names/],
  [{ BLOB_URL: 's3://acme-files/x?versionId=1', AWS_REGION: 'eu-west-1' }, /the prefix 'x\?versionId=1' must be folder names/],
  [{ BLOB_URL: 's3://acme-files/x' }, /^BLOB_URL is an AWS S3 bucket: set AWS_REGION/],
  [{ BLOB_URL: 's3://acme-files/x', AWS_REGION: 'Europe (Paris)' }, /^AWS_REGION must be a region name such as eu-west-1, got 'Europe \(Paris\)'$/],
  [{ BLOB_URL: 's3://acme-files/x', AWS_REGION: 'eu-west-1', AWS_ACCESS_KEY_ID: 'AKIA' }, /^AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY$/],
  [{ BLOB_URL: 's3://acme-files/x', AWS_REGION: 'eu-west-1', AWS_SECRET_ACCESS_KEY: 'secret' }, /^AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID$/],
  [{ BLOB_URL: 's3://acme-files/x', S3_ENDPOINT: 'ftp://minio:9000' }, /^S3_ENDPOINT must start with http:\/\/ or https:\/\//],
  [{ BLOB_URL: 's3://acme-files/x', S3_ENDPOINT: '127.0.0.1:9000' }, /^S3_ENDPOINT must be an http:\/\/ or https:\/\/ URL/],
  [{ BLOB_URL: 's3://acme-files/x', S3_ENDPOINT: 'http://u:secret@minio:9000' }, /^S3_ENDPOINT must not hold credentials/],
  [{ BLOB_URL: 's3://acme-files/x', S3_ENDPOINT: 'http://minio:9000/acme-files' }, /^S3_ENDPOINT must be the server's address only, as in http:\/\/minio:9000$/],
  [{ BLOB_URL: 's3://acme-files/x', ...MINIO, S3_FORCE_PATH_STYLE: 'yes' }, /^S3_FORCE_PATH_STYLE must be 1 or 0, got 'yes'$/],
  [{ S3_ENDPOINT: 'http://127.0.0.1:9000' }, /^S3_ENDPOINT is set but BLOB_URL is not/],
  [{ S3_FORCE_PATH_STYLE: '1' }, /^S3_FORCE_PATH_STYLE is set but BLOB_URL is not/],
  [{ BLOB_URL: 's3://acme-files/x', ...MINIO, FILES_DIR: '/srv/files' }, /^FILES_DIR and BLOB_URL are both set/],
];

anyTest('settings that make no sense are refused, each with one line naming it and no secret', (t) => {
  for (const [env, message] of badSettings) {
    const error = t.throws(() => loadConfig(env), { instanceOf: ConfigError, message }, JSON.stringify(env));
    t.false(error?.message.includes('secret') ?? true, `no secret in: ${error?.message}`);
    t.false(error?.message.includes('\n') ?? true);
  }
});

/** `serve` with `env`, which must not start: its exit code and what it printed. */
async function refusesToStart(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const data = await tempDataDir();
  try {
    const { code, stderr } = await runCli(['serve'], { DATA_DIR: data.dir, PORT: '0', ...env });
    return { code, stderr };
  } finally {
    await data.remove();
  }
}

// A bad setting takes the one-line path of every ConfigError (test/server/startup.test.ts).
test('serve with a bucket that is not there, or a store that does not answer, stops with one line', async (t) => {
  const [noBucket, noServer] = await Promise.all([
    refusesToStart({ ...s3.env('x/'), BLOB_URL: 's3://no-such-bucket/x' }),
    refusesToStart({ ...s3.env('x/'), S3_ENDPOINT: 'http://127.0.0.1:1' }),
  ]);
  t.deepEqual(noBucket, { code: 1, stderr: `koa-model-gateway: cannot reach the bucket s3://no-such-bucket/x/ at ${s3.endpoint} (NotFound)\n` });
  t.deepEqual(noServer, { code: 1, stderr: 'koa-model-gateway: cannot reach the bucket s3://kmg-test/x/ at http://127.0.0.1:1 (ECONNREFUSED)\n' });
});
