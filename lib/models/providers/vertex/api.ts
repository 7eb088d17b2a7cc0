import type { z } from 'zod';
import { httpBaseUrl, nonEmptyString, parseOptions, settingsObject } from '../../../settings/schemas.js';
import { httpUpstream, untilAborted, type HttpUpstream } from '../http.js';

/**
 * The options of a `vertex` or `vertex-anthropic` provider: `id`, the Google Cloud `project` and
 * `location` (a region, `us-central1`, or `global`), `baseURL` (default: the location's endpoint,
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

/** What the Vertex AI providers share: one pool to the location's endpoint, its publishers' paths, and the access token. */
export interface VertexApi {
  id: string;
  upstream: HttpUpstream;
  /** `/v1/projects/{project}/locations/{location}/publishers/{publisher}/models`. */
  models(publisher: string): string;
  /** `headers` with the authorization of an access token, which is awaited no longer than `signal` allows. */
  authorized(headers: Readonly<Record<string, string>>, signal: AbortSignal): Promise<Record<string, string>>;
}

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

/** Checks a Vertex AI provider's options (`caller` names it in the error) and makes what its calls share. */
export function vertexApi(options: VertexProviderOptions, caller: string): VertexApi {
  const { auth: given, ...settings } = options;
  const { id, project, location, baseURL, keyFile } = parseOptions(vertexProviderOptions, settings, caller);
  if (given === undefined) requireGoogleAuth(caller);
  const auth = given ?? googleAuth(keyFile);
  const host = location === 'global' ? 'https://aiplatform.googleapis.com' : `https://${location}-aiplatform.googleapis.com`;
  const locationPath = `/v1/projects/${encodeURIComponent(project)}/locations/${encodeURIComponent(location)}`;
  return {
    id,
    upstream: httpUpstream(baseURL ?? host),
    models: (publisher) => `${locationPath}/publishers/${publisher}/models`,
    async authorized(headers, signal) {
      const token = await untilAborted(auth.getAccessToken(), signal);
      if (typeof token !== 'string' || token === '') throw new Error('google-auth-library gave no access token');
      return { ...headers, authorization: `Bearer ${token}` };
    },
  };
}

/**
 * `google-auth-library`'s `GoogleAuth` for the scope Vertex AI needs, from `keyFile` or the default
 * credentials; loaded on first use, only by a configuration that has a Vertex AI provider. The
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

/** Refuses, at start-up, a Vertex AI provider without google-auth-library: its calls could never be authorised. */
function requireGoogleAuth(caller: string): void {
  try {
    import.meta.resolve('google-auth-library');
  } catch {
    throw new TypeError(`koa-model-gateway: ${caller}: needs the package google-auth-library (npm install google-auth-library)`);
  }
}
