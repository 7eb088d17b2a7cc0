import type { z } from 'zod';
import { httpBaseUrl, nonEmptyString, settingsObject } from '../../settings/schemas.js';
import type { ProviderRequest } from '../provider.js';

/**
 * The options of a provider reached over HTTP: `id`, `baseURL` (default: the provider's public
 * API) and `apiKey`, the provider's own credential (never a client's gateway key), sent only
 * when set.
 */
export const httpProviderOptions = settingsObject({
  id: nonEmptyString,
  baseURL: httpBaseUrl.optional(),
  apiKey: nonEmptyString.optional(),
});

export type HttpProviderOptions = z.input<typeof httpProviderOptions>;

/** `base` without its trailing slashes, then `path`. */
export const endpointUrl = (base: string, path: string) => `${base.replace(/\/+$/, '')}${path}`;

/**
 * POSTs the request's body as JSON to a provider, asking for an event stream when the body
 * streams. Redirects are never followed: fetch would resend the body (attached PDFs included) and
 * every credential header but `Authorization` to whatever address the upstream names, and a 3xx
 * answer is a 502 like any other unexpected status.
 */
export function postJson(url: string, headers: Readonly<Record<string, string>>, { body, signal }: ProviderRequest): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: body.stream === true ? 'text/event-stream' : 'application/json',
      ...headers,
    },
    body: JSON.stringify(body),
    signal,
    redirect: 'manual',
  });
}
