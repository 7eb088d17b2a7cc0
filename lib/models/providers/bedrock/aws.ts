import { errors } from '../../../errors/gateway-error.js';

// AWS's own packages, optional peer dependencies loaded only when a bedrock provider makes its
// first call: SigV4 signing (@smithy/signature-v4 with @aws-crypto/sha256-js), the EventStream
// codec (@smithy/core/event-streams) and, unless the provider is given its credentials, AWS's
// default credential chain (@aws-sdk/credential-providers).

/** The packages a bedrock provider loads, for the message that names the missing ones. */
export const BEDROCK_PACKAGES = ['@smithy/signature-v4', '@aws-crypto/sha256-js', '@smithy/core', '@aws-sdk/credential-providers'] as const;

/** AWS credentials, as the SDK's credential providers give them. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** Where a provider's credentials come from: called before each call (the SDK's providers cache and refresh them). */
export type AwsCredentialSource = () => Promise<AwsCredentials>;

/** The parts of a request that SigV4 signs. */
export interface SignedRequest {
  url: URL;
  headers: Record<string, string>;
  body: string;
}

/** One EventStream message: its string headers (`:event-type`, `:message-type`...) and its payload. */
export interface EventMessage {
  headers: Record<string, string>;
  body: Uint8Array;
}

/** What a bedrock provider needs of AWS's packages, loaded once. */
export interface Aws {
  /** `request`'s headers with SigV4's (`authorization`, `x-amz-date`, `x-amz-security-token`). */
  sign(request: SignedRequest): Promise<Record<string, string>>;
  /** The messages of an EventStream body, each at most `maxBytes`. */
  messages(body: AsyncIterable<Buffer | string>, maxBytes: number): AsyncGenerator<EventMessage>;
}

async function load<T>(name: string, loading: Promise<T>): Promise<T> {
  try {
    return await loading;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new Error(`koa-model-gateway: a bedrock provider needs ${name}, not installed: npm install ${BEDROCK_PACKAGES.join(' ')}`, { cause: err });
  }
}

/** AWS's packages for the service `service` (SigV4's name: `bedrock`) in `region`, with `credentials` or AWS's default chain. */
export async function loadAws(service: string, region: string, credentials: AwsCredentialSource | undefined): Promise<Aws> {
  const [{ SignatureV4 }, { Sha256 }, { EventStreamCodec }, chain] = await Promise.all([
    load('@smithy/signature-v4', import('@smithy/signature-v4')),
    load('@aws-crypto/sha256-js', import('@aws-crypto/sha256-js')),
    load('@smithy/core', import('@smithy/core/event-streams')),
    credentials ? undefined : load('@aws-sdk/credential-providers', import('@aws-sdk/credential-providers')),
  ]);
  const signer = new SignatureV4({ service, region, sha256: Sha256, credentials: credentials ?? chain!.fromNodeProviderChain() });
  const codec = new EventStreamCodec(
    (bytes) => Buffer.from(bytes).toString('utf8'),
    (text) => Buffer.from(text, 'utf8'),
  );
  return {
    async sign({ url, headers, body }) {
      const signed = await signer.sign({
        method: 'POST',
        protocol: url.protocol,
        hostname: url.hostname,
        ...(url.port !== '' && { port: Number(url.port) }),
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers: { ...headers, host: url.host },
        body,
      });
      return signed.headers;
    },
    async *messages(body, maxBytes) {
      for await (const frame of frames(body, maxBytes)) {
        const { headers, body: payload } = codec.decode(frame);
        const strings: Record<string, string> = {};
        for (const [name, header] of Object.entries(headers)) if (header.type === 'string') strings[name] = header.value;
        yield { headers: strings, body: payload };
      }
    },
  };
}

/** An EventStream message's prelude, two checksums and no headers: the least a message is. */
const MIN_MESSAGE_BYTES = 16;

/**
 * The whole messages of an EventStream body, cut by the total length each one's prelude gives,
 * for the codec to check and decode: a message over `maxBytes` is refused before it is held
 * (the SDK's own splitter allocates whatever length a prelude claims), a body cut mid-message
 * fails. The chunks of a message are joined once, when it is whole.
 */
async function* frames(body: AsyncIterable<Buffer | string>, maxBytes: number): AsyncGenerator<Uint8Array> {
  let chunks: Buffer[] = [];
  let held = 0;
  for await (const chunk of body) {
    const bytes = Buffer.from(chunk);
    chunks.push(bytes);
    held += bytes.length;
    while (held >= 4) {
      const head = chunks.length === 1 || (chunks[0] as Buffer).length >= 4 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      const length = head.readUInt32BE(0);
      if (length > maxBytes) throw errors.upstreamAnswerTooLarge(maxBytes);
      if (length < MIN_MESSAGE_BYTES) throw new Error('an EventStream message shorter than its prelude');
      if (held < length) break;
      const whole = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      yield whole.subarray(0, length);
      const rest = whole.subarray(length);
      chunks = rest.length === 0 ? [] : [rest];
      held = rest.length;
    }
  }
  if (held > 0) throw new Error('the EventStream ended mid-message');
}
