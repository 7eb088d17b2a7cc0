import type * as Identity from '@azure/identity';
import { z } from 'zod';
import { nonEmptyString, settingsObject } from '../../../settings/schemas.js';

/** The scope of an Azure OpenAI / Foundry token. */
const COGNITIVE_SERVICES_SCOPE = 'https://cognitiveservices.azure.com/.default';

/** The `@azure/identity` credentials a configuration may name (`entraId.credential`). */
const CREDENTIALS = [
  'DefaultAzureCredential',
  'ManagedIdentityCredential',
  'WorkloadIdentityCredential',
  'AzureCliCredential',
  'EnvironmentCredential',
] as const;

// The credentials that take a user-assigned identity's client id, and the option each names it by.
const CLIENT_ID_OPTION: Partial<Record<(typeof CREDENTIALS)[number], string>> = {
  DefaultAzureCredential: 'managedIdentityClientId',
  ManagedIdentityCredential: 'clientId',
  WorkloadIdentityCredential: 'clientId',
};

/**
 * `entraId`: a Microsoft Entra ID token instead of an API key, from `@azure/identity`'s
 * `credential` (default `DefaultAzureCredential`), with `clientId` the user-assigned managed
 * identity's or the workload identity's (not for `AzureCliCredential` and `EnvironmentCredential`).
 */
export const entraIdOptions = settingsObject({
  credential: z.enum(CREDENTIALS, { error: `must be one of ${CREDENTIALS.join(', ')}` }).optional(),
  clientId: nonEmptyString.optional(),
}).refine(({ credential = 'DefaultAzureCredential', clientId }) => clientId === undefined || CLIENT_ID_OPTION[credential] !== undefined, {
  error: 'clientId is for DefaultAzureCredential, ManagedIdentityCredential and WorkloadIdentityCredential only',
});

export type EntraIdOptions = z.output<typeof entraIdOptions>;

/** An access token as `@azure/core-auth`'s `TokenCredential.getToken()` answers. */
export interface AzureAccessToken {
  token: string;
  expiresOnTimestamp: number;
}

/** What `@azure/identity`'s credentials (any `TokenCredential` of `@azure/core-auth`) have. */
export interface AzureTokenCredential {
  getToken(scopes: string | string[], options?: object): Promise<AzureAccessToken | null>;
}

const IDENTITY = '@azure/identity';

/** Throws, naming the package, when `@azure/identity` (an optional peer dependency) is not installed: at start-up, not at the first call. */
export function requireIdentityPackage(where: string): void {
  try {
    import.meta.resolve(IDENTITY);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new TypeError(`koa-model-gateway: ${where}: a Microsoft Entra ID token needs the package ${IDENTITY} (npm install ${IDENTITY})`, { cause: err });
  }
}

/**
 * A function that answers a bearer token for Azure OpenAI: `@azure/identity`'s
 * `getBearerTokenProvider()` over `credential` (or the credential `entraId` names), which keeps
 * the token and gets a new one before it expires. The package is imported at the first call.
 */
export function entraIdTokens(source: { credential: AzureTokenCredential } | { entraId: EntraIdOptions }): () => Promise<string> {
  let tokens: Promise<() => Promise<string>> | undefined;
  const load = async () => {
    const identity = await import(IDENTITY);
    const credential = 'credential' in source ? source.credential : namedCredential(identity, source.entraId);
    return identity.getBearerTokenProvider(credential, COGNITIVE_SERVICES_SCOPE);
  };
  return async () => {
    // A failed import is tried again at the next call, not remembered.
    tokens ??= load().catch((err: unknown) => {
      tokens = undefined;
      throw err;
    });
    return (await tokens)();
  };
}

function namedCredential(identity: typeof Identity, { credential = 'DefaultAzureCredential', clientId }: EntraIdOptions): AzureTokenCredential {
  const option = CLIENT_ID_OPTION[credential];
  const options = clientId === undefined || option === undefined ? {} : { [option]: clientId };
  const Credential = identity[credential] as new (options: object) => AzureTokenCredential;
  return new Credential(options);
}
