import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { environmentVariableName, httpBaseUrl, nonEmptyString, parseOptions, settingsObject } from '../../../settings/schemas.js';
import { isObject, type JsonObject } from '../../content.js';
import type { StreamPart } from '../../formats/neutral.js';
import { UpstreamStatusError, type EmbedRequest, type Provider, type ProviderAnswer } from '../../provider.js';
import { DEFAULT_MAX_UPSTREAM_BYTES } from '../../upstream-call.js';
import { httpUpstream, untilAborted, type UpstreamRequest } from '../http.js';
import { refuseFailure, upstreamJson } from '../neutral-http.js';
import { loadAws, type Aws, type AwsCredentialSource } from './aws.js';
import { ConverseStreamReader } from './converse-stream.js';
import { CONVERSE, readConverseAnswer, writeConverseRequest } from './converse.js';
import { embedBody, readEmbedding } from './embeddings.js';

const REGION = 'must be an AWS region (us-east-1, eu-west-3...)';
const PAIR = 'must name accessKeyIdEnv and secretAccessKeyEnv together, and sessionTokenEnv only with them';

/**
 * The options of `bedrockProvider()`: `id`, `region`, `baseURL` (default
 * `https://bedrock-runtime.{region}.amazonaws.com`) and where its credentials come from: the
 * environment variables `accessKeyIdEnv` and `secretAccessKeyEnv` (and `sessionTokenEnv`) name,
 * read once, when the provider is made; or, in code, `credentials`; else AWS's default chain
 * (`AWS_ACCESS_KEY_ID`..., profiles, SSO, the instance's or container's role).
 */
export const bedrockProviderOptions = settingsObject({
  id: nonEmptyString,
  region: z.string({ error: REGION }).regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, { error: REGION }),
  baseURL: httpBaseUrl.optional(),
  accessKeyIdEnv: environmentVariableName.optional(),
  secretAccessKeyEnv: environmentVariableName.optional(),
  sessionTokenEnv: environmentVariableName.optional(),
  credentials: z.custom<AwsCredentialSource>((value) => typeof value === 'function', { error: 'must be a function' }).optional(),
}).refine(
  ({ accessKeyIdEnv, secretAccessKeyEnv, sessionTokenEnv }) =>
    (accessKeyIdEnv === undefined) === (secretAccessKeyEnv === undefined) && (sessionTokenEnv === undefined || accessKeyIdEnv !== undefined),
  { error: PAIR },
);

export type BedrockProviderOptions = z.input<typeof bedrockProviderOptions>;

/** The credentials the environment variables of `options` hold, read now; undefined when it names none. */
function environmentCredentials(options: z.output<typeof bedrockProviderOptions>): AwsCredentialSource | undefined {
  const { accessKeyIdEnv, secretAccessKeyEnv, sessionTokenEnv } = options;
  if (accessKeyIdEnv === undefined || secretAccessKeyEnv === undefined) return undefined;
  const read = (name: string) => {
    const value = process.env[name];
    if (!value) throw new TypeError(`koa-model-gateway: bedrockProvider(): provider '${options.id}': the environment variable ${name} is not set`);
    return value;
  };
  const credentials = {
    accessKeyId: read(accessKeyIdEnv),
    secretAccessKey: read(secretAccessKeyEnv),
    ...(sessionTokenEnv && { sessionToken: read(sessionTokenEnv) }),
  };
  return async () => credentials;
}

/**
 * An upstream's HTTP error as a neutral provider throws it: Bedrock's message and its error type
 * (`x-amzn-errortype`, `ThrottlingException`), the status as it came (a 429 retried elsewhere and
 * cooled down, a 400 the client's, anything else a 502).
 */
function statusError(status: number, text: string, answer: ProviderAnswer): UpstreamStatusError {
  let message = `Bedrock answered ${status}`;
  try {
    const parsed: unknown = JSON.parse(text);
    const said = isObject(parsed) ? (parsed.message ?? parsed.Message) : undefined;
    if (typeof said === 'string' && said !== '') message = said;
  } catch {
    // Not JSON (a proxy's page): the status says enough.
  }
  const type = answer.headers['x-amzn-errortype'];
  const retryAfter = answer.headers['retry-after'];
  return new UpstreamStatusError(status, message, {
    ...(typeof type === 'string' && { code: type.split(':')[0] }),
    ...(typeof retryAfter === 'string' && { retryAfter }),
  });
}

/** ConverseStream's exceptions by `:exception-type`, as the HTTP status each has when Converse answers it whole. */
const EXCEPTION_STATUS: Readonly<Record<string, number>> = {
  throttlingException: 429,
  validationException: 400,
  serviceUnavailableException: 503,
  internalServerException: 500,
  modelStreamErrorException: 424,
};

/** An exception in the stream (`:message-type` exception or error) as the error a neutral provider throws. */
function streamError(headers: Record<string, string>, payload: string): UpstreamStatusError {
  const type = headers[':exception-type'] ?? headers[':error-code'] ?? 'unknown';
  let message = headers[':error-message'] ?? `Bedrock's stream failed: ${type}`;
  try {
    const parsed: unknown = JSON.parse(payload);
    if (isObject(parsed) && typeof parsed.message === 'string') message = parsed.message;
  } catch {
    // The type says enough.
  }
  return new UpstreamStatusError(EXCEPTION_STATUS[type] ?? 502, message, { code: type.charAt(0).toUpperCase() + type.slice(1) });
}

/**
 * Amazon Bedrock's Runtime API: `Converse` and `ConverseStream` (`POST {baseURL}/model/{modelId}/converse`
 * and `/converse-stream`) for every client format, and Titan's and Cohere's embeddings through
 * `InvokeModel` (`/model/{modelId}/invoke`, one input a call). `upstreamModel` is a model id
 * (`anthropic.claude-sonnet-4-5-20250929-v1:0`), an inference profile's id (`us.anthropic...`) or
 * an ARN. Each call is signed with SigV4 (service `bedrock`) and a stream read as AWS's
 * EventStream, by AWS's own packages, optional peer dependencies loaded at the first call:
 * `@smithy/signature-v4`, `@aws-crypto/sha256-js`, `@smithy/core` and, for AWS's default
 * credential chain, `@aws-sdk/credential-providers`. One pool of keep-alive connections, which
 * `close()` closes. A ThrottlingException, answered or in the stream before its first content,
 * is a 429 (retried on another deployment, cooled down); one later ends the client's stream in
 * its error event.
 * @example bedrockProvider({ id: 'bedrock', region: 'us-east-1' }) // credentials from AWS's default chain
 * @example bedrockProvider({ id: 'bedrock', region: 'eu-west-3', accessKeyIdEnv: 'BEDROCK_KEY_ID', secretAccessKeyEnv: 'BEDROCK_SECRET' })
 */
export function bedrockProvider(options: BedrockProviderOptions): Provider {
  const parsed = parseOptions(bedrockProviderOptions, options, 'bedrockProvider()');
  const { id, region } = parsed;
  const credentials = parsed.credentials ?? environmentCredentials(parsed);
  const baseURL = parsed.baseURL ?? `https://bedrock-runtime.${region}.amazonaws.com`;
  const base = new URL(baseURL);
  const prefix = base.pathname.replace(/\/+$/, '');
  const upstream = httpUpstream(baseURL);
  let loading: Promise<Aws> | undefined;
  const aws = () => {
    loading ??= loadAws('bedrock', region, credentials).catch((err: unknown) => {
      loading = undefined;
      throw err;
    });
    return loading;
  };

  /** POSTs `body` to the model's `operation`, signed as the bytes httpUpstream sends (its JSON); the answer's status as it came. */
  async function post(model: string, operation: string, body: JsonObject, accept: string, call: UpstreamRequest) {
    const path = `/model/${encodeURIComponent(model)}/${operation}`;
    const url = new URL(`${prefix}${path}`, base.origin);
    // Signing asks for the credentials (AWS's default chain may go to the network): within the call's time.
    const signing = aws().then((loaded) => loaded.sign({ url, headers: { 'content-type': 'application/json', accept }, body: JSON.stringify(body) }));
    const signed = await untilAborted(signing, call.signal);
    return upstream.post(path, signed, body, call);
  }

  const answerId = (answer: ProviderAnswer) => {
    const requestId = answer.headers['x-amzn-requestid'];
    return `bedrock-${typeof requestId === 'string' ? requestId : randomUUID()}`;
  };

  return {
    id,
    telemetry: upstream.telemetry('aws.bedrock'),
    neutral: {
      name: CONVERSE,
      check: (request) => {
        writeConverseRequest(request);
        return request.omitted;
      },
      async generate(call) {
        const { request, maxBytes } = call;
        const answer = await post(request.model, 'converse', writeConverseRequest(request), 'application/json', call);
        return readConverseAnswer(await upstreamJson(answer, maxBytes, statusError), answerId(answer), request.model);
      },
      async *stream(call) {
        const { request, maxBytes } = call;
        const answer = await post(request.model, 'converse-stream', writeConverseRequest(request), 'application/vnd.amazon.eventstream', call);
        try {
          await refuseFailure(answer, statusError);
          const reader = new ConverseStreamReader(answerId(answer), request.model);
          // The start is held until content follows: an exception right after messageStart (a throttling) is still the call's status, and retried.
          let held: StreamPart[] | undefined = [];
          for await (const message of (await aws()).messages(answer.body, maxBytes)) {
            const payload = Buffer.from(message.body).toString('utf8');
            const kind = message.headers[':message-type'];
            if (kind === 'exception' || kind === 'error') throw streamError(message.headers, payload);
            const event = JSON.parse(payload) as unknown;
            if (kind !== 'event' || !isObject(event)) continue;
            const parts = reader.read(message.headers[':event-type'] ?? '', event);
            if (held === undefined) {
              yield* parts;
              continue;
            }
            held.push(...parts);
            if (held.some((part) => part.type !== 'start')) {
              yield* held;
              held = undefined;
            }
          }
          yield* [...(held ?? []), ...reader.end()];
          if (!reader.finished) throw new Error("the upstream's stream ended before its finish");
        } finally {
          if (!answer.body.readableEnded) answer.body.destroy();
        }
      },
    },
    // Titan takes one text a call; Cohere's batches go one by one too, as one provider has one limit.
    embeddingInputsPerCall: 1,
    async embed(request: EmbedRequest) {
      const answer = await post(request.model, 'invoke', embedBody(request), 'application/json', request);
      const body = await upstreamJson(answer, DEFAULT_MAX_UPSTREAM_BYTES, statusError);
      const counted = Number(answer.headers['x-amzn-bedrock-input-token-count']);
      return readEmbedding(request.model, body, Number.isSafeInteger(counted) && counted >= 0 ? counted : undefined);
    },
    close: upstream.close,
  };
}
