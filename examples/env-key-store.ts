/**
 * A KeyStore of your own: keys from an environment variable instead of a database. Only
 * `findByHash` matters to `apiKey()`; the keys are hashed once at start-up and compared by hash.
 *
 *   GATEWAY_KEYS="acme=kmg_sk_first-secret-key,globex=kmg_sk_second-secret-key" \
 *     node --conditions=@koa-model-gateway/source --import tsx examples/env-key-store.ts
 *
 * Each entry is `<account>=<key>`; every key gets the `models:read` and `chat:completions` scopes.
 */
import Koa from 'koa';
import { apiKey, gatewayErrors } from 'koa-model-gateway';
import {
  hashApiKey,
  type ApiKeyRecord,
  type KeyRevocation,
  type KeyRotation,
  type KeyRotationResult,
  type KeyStore,
  type KeyUpdate,
  type NewApiKey,
} from 'koa-model-gateway/auth';
import { echoProvider, modelsRouter } from 'koa-model-gateway/models';

class EnvKeyStore implements KeyStore {
  readonly #byHash = new Map<string, ApiKeyRecord>();

  constructor(list: string) {
    for (const [index, entry] of list.split(',').entries()) {
      const [account, key] = entry.trim().split('=');
      if (!account || !key) throw new TypeError(`GATEWAY_KEYS entry ${index + 1} is not <account>=<key>`);
      const hash = hashApiKey(key);
      this.#byHash.set(hash, {
        id: `env_${index + 1}`,
        account,
        hash,
        scopes: ['models:read', 'chat:completions'],
        models: null,
        createdAt: 0,
        expiresAt: null,
        revokedAt: null,
      });
    }
  }

  async findByHash(hash: string): Promise<ApiKeyRecord | undefined> {
    return this.#byHash.get(hash);
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    return [...this.#byHash.values()].find((key) => key.id === id);
  }

  async list(filter: { account?: string } = {}): Promise<ApiKeyRecord[]> {
    return [...this.#byHash.values()].filter((key) => filter.account === undefined || key.account === filter.account);
  }

  // The environment is the source of truth: keys are added and removed there, then the process restarted.
  async create(_key: NewApiKey): Promise<ApiKeyRecord> {
    throw new Error('EnvKeyStore is read-only: add the key to GATEWAY_KEYS');
  }

  async revoke(_id: string): Promise<KeyRevocation> {
    throw new Error('EnvKeyStore is read-only: remove the key from GATEWAY_KEYS');
  }

  async update(_id: string, _update: KeyUpdate): Promise<ApiKeyRecord | undefined> {
    throw new Error('EnvKeyStore is read-only: change the key in GATEWAY_KEYS');
  }

  async rotate(_id: string, _rotation: KeyRotation): Promise<KeyRotationResult> {
    throw new Error('EnvKeyStore is read-only: replace the key in GATEWAY_KEYS');
  }

  // No last-used times: the environment keeps no state.
  async touch(_ids: readonly string[], _atSeconds: number): Promise<void> {}
}

const keys = new EnvKeyStore(process.env.GATEWAY_KEYS ?? '');
const models = modelsRouter({ catalog: [{ id: 'echo-1', provider: 'echo' }], providers: [echoProvider({ id: 'echo' })] });

const app = new Koa();
app.use(gatewayErrors());
app.use(apiKey({ store: keys }));
app.use(models.routes());
app.use(models.allowedMethods());

const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 3000;
  console.log(`Listening on http://127.0.0.1:${port}`);
});
