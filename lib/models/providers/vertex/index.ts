import type { z } from 'zod';
import { httpBaseUrl, nonEmptyString, parseOptions, settingsObject } from '../../../settings/schemas.js';
import type { Provider } from '../../provider.js';
import { callHeaders, httpUpstream, untilAborted } from '../http.js';
import { geminiProtocol, type GeminiTransport } from '../gemini/protocol.js';
import { VERTEX_EMBEDDING_INPUTS_PER_CALL, vertexEmbed } from './embed.js';

/**
 * The options of a `vertex` provider: `id`, the Google Cloud `project` and `location` (a region,
 * `us-central1`, or `global`), `baseURL` (default: the location's endpoint,
 * `https://{location}-aiplatform.googleapis.com`, `https://aiplatform.googleapis.com` for
 * `global`), and `keyFile`, a service account's key file (default: the environment's default
 * credentials: `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's, or the metadata server's).
 */
export const vertexProviderOptions = settingsObject({
  id: nonEmptyString,
  project: nonEmptyString,
  location: nonEmptyString,
  baseURL: httpBaseUrl.optional(),
  keyFile: nonEmptyString.optional(),
});

/** Where a provider gets its access tokens: google-auth-library's `GoogleAuth` (or any object with its `getAccessToken()`). */
export interface TokenSource {
  getAccessToken(): Promise<string | null | undefined>;
}

export type VertexProviderOptions = z.input<typeof vertexProviderOptions> & {
  /** In code only: the token source to use instead of a `GoogleAuth` of the provider's own. */
  auth?: TokenSource;
};

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

/**
 * `google-auth-library`'s `GoogleAuth` for the scope Vertex AI needs, from `keyFile` or the default
 * credentials; loaded on first use, only by a configuration that has a vertex provider. The
 * library caches the token and refreshes it before it expires.
 */
function googleAuth(keyFile: string | undefined): TokenSource {
  let auth: Promise<TokenSource> | undefined;
  return {
    async getAccessToken() {
      auth ??= import('google-auth-library').then(
        ({ GoogleAuth }) => new GoogleAuth({ scopes: [SCOPE], ...(keyFile !== undefined && { keyFilename: keyFile }) }),
      );
      return (await auth).getAccessToken();
    },
  };
}

/**
 * Gemini on Google Cloud's Vertex AI: `POST {baseURL}/v1/projects/{project}/locations/{location}/publishers/google/models/{upstreamModel}:generateContent`
 * and `:streamGenerateContent?alt=sse` (embeddings by `:predict`), with an OAuth access token from `google-auth-library` (an
 * optional peer dependency: install it beside the gateway), over one pool of keep-alive
 * connections. It speaks the neutral representation, as `geminiProvider()` does. Traces name it
 * `gcp.vertex_ai`.
 * @example vertexProvider({ id: 'vertex', project: 'my-project', location: 'us-central1' })
 */
export function vertexProvider(options: VertexProviderOptions): Provider {
  const { auth: given, ...settings } = options;
  const { id, project, location, baseURL, keyFile } = parseOptions(vertexProviderOptions, settings, 'vertexProvider()');
  if (given === undefined) requireGoogleAuth();
  const auth = given ?? googleAuth(keyFile);
  const host = location === 'global' ? 'https://aiplatform.googleapis.com' : `https://${location}-aiplatform.googleapis.com`;
  const upstream = httpUpstream(baseURL ?? host);
  const { json, stream } = callHeaders({});
  const models = `/v1/projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(location)}/publishers/google/models`;
  const transport: GeminiTransport = {
    async post(model, method, body, call) {
      const token = await untilAborted(auth.getAccessToken(), call.signal);
      if (typeof token !== 'string' || token === '') throw new Error('google-auth-library gave no access token');
      const headers = { ...(method.startsWith('stream') ? stream : json), authorization: `Bearer ${token}` };
      return upstream.post(`${models}/${encodeURIComponent(model)}:${method}`, headers, body, call);
    },
  };
  return {
    id,
    telemetry: upstream.telemetry('gcp.vertex_ai'),
    neutral: geminiProtocol(transport, 'Vertex AI'),
    embed: vertexEmbed(transport, 'Vertex AI'),
    embeddingInputsPerCall: VERTEX_EMBEDDING_INPUTS_PER_CALL,
    close: upstream.close,
  };
}

/** Refuses, at start-up, a vertex provider without google-auth-library: its calls could never be authorised. */
function requireGoogleAuth(): void {
  try {
    import.meta.resolve('google-auth-library');
  } catch {
    throw new TypeError('koa-model-gateway: vertexProvider(): needs the package google-auth-library (npm install google-auth-library)');
  }
}
