/**
 * A store of your own: admin tokens in one JSON file, for a single-process gateway that keeps its
 * API keys elsewhere but wants its admin tokens to survive a restart. It is checked by the same
 * contract suite as the built-in stores (`adminTokenStoreContract()` from `koa-model-gateway/testing`):
 * see json-file-token-store.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import type { AdminTokenRecord, AdminTokenStore, NewAdminToken } from 'koa-model-gateway/admin';

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** `adm_` and 24 letters and digits, as every admin token store names its records. */
function newTokenId(): string {
  // 248 is the largest multiple of 62 below 256: bytes past it are dropped, so that no letter is likelier.
  const letters = [...randomBytes(64)].filter((byte) => byte < 248).map((byte) => ID_ALPHABET[byte % 62]);
  return `adm_${letters.slice(0, 24).join('')}`;
}

export class JsonFileTokenStore implements AdminTokenStore {
  readonly #path: string;
  /** Every change reads, changes and rewrites the file in turn, so that no two changes lose one another. */
  #changes: Promise<unknown> = Promise.resolve();

  /** `path`: the JSON file, created on the first token. */
  constructor(path: string) {
    this.#path = path;
  }

  async findByHash(hash: string): Promise<AdminTokenRecord | undefined> {
    return (await this.#read()).find((record) => record.hash === hash);
  }

  async get(id: string): Promise<AdminTokenRecord | undefined> {
    return (await this.#read()).find((record) => record.id === id);
  }

  async list(): Promise<AdminTokenRecord[]> {
    return this.#read();
  }

  create(token: NewAdminToken): Promise<AdminTokenRecord> {
    return this.#change((records) => {
      if (records.some((record) => record.hash === token.hash)) throw new Error('a token with this hash exists');
      const record: AdminTokenRecord = { id: newTokenId(), hash: token.hash, name: token.name, createdAt: Math.floor(Date.now() / 1000), revokedAt: null };
      records.push(record);
      return record;
    });
  }

  revoke(id: string): Promise<boolean> {
    return this.#change((records) => {
      const record = records.find((candidate) => candidate.id === id);
      if (!record) return false;
      record.revokedAt ??= Math.floor(Date.now() / 1000);
      return true;
    });
  }

  async #read(): Promise<AdminTokenRecord[]> {
    try {
      return JSON.parse(await readFile(this.#path, 'utf8')) as AdminTokenRecord[];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  }

  #change<T>(apply: (records: AdminTokenRecord[]) => T): Promise<T> {
    const change = this.#changes.then(async () => {
      const records = await this.#read();
      const result = apply(records);
      // A whole new file renamed into place: a crash mid-write leaves the old file, never half of one.
      await writeFile(`${this.#path}.tmp`, JSON.stringify(records));
      await rename(`${this.#path}.tmp`, this.#path);
      return structuredClone(result);
    });
    this.#changes = change.catch(() => undefined);
    return change;
  }
}
