import { Readable } from 'node:stream';
import type { BlobInfo, BlobStore } from '../../files/blob-store.js';

interface Blob {
  bytes: Buffer;
  createdAt: number;
}

/**
 * BlobStore in process memory, holding every file whole: for tests and examples only.
 * @example
 * const blobs = new MemoryBlobStore();
 * const bytes = await blobs.put(id, createReadStream(upload.path));
 */
export class MemoryBlobStore implements BlobStore {
  readonly #blobs = new Map<string, Blob>();

  async put(id: string, body: Readable): Promise<number> {
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
    // Stored only once the stream ended: a failed stream throws above and leaves nothing.
    const bytes = Buffer.concat(chunks);
    this.#blobs.set(id, { bytes, createdAt: Math.floor(Date.now() / 1000) });
    return bytes.length;
  }

  async get(id: string): Promise<Readable | undefined> {
    const blob = this.#blobs.get(id);
    return blob && Readable.from([blob.bytes]);
  }

  async delete(id: string): Promise<void> {
    this.#blobs.delete(id);
  }

  async has(id: string): Promise<boolean> {
    return this.#blobs.has(id);
  }

  async *list(): AsyncIterable<BlobInfo> {
    for (const [id, blob] of [...this.#blobs]) yield { id, createdAt: blob.createdAt };
  }
}
