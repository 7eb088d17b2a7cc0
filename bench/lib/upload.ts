import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { request } from 'node:http';
import { pipeline } from 'node:stream/promises';

/** The largest PDF api.md accepts: 25 MiB. */
export const MAX_PDF_BYTES = 26_214_400;

/** Writes a PDF-looking file of exactly `bytes` bytes at `path` (a `%PDF-` header, then noise). */
export async function writePdf(path: string, bytes: number): Promise<void> {
  const header = Buffer.from('%PDF-1.7\n');
  const trailer = Buffer.from('\n%%EOF\n');
  const noise = randomBytes(1_048_576);
  const file = await open(path, 'w');
  try {
    await file.write(header);
    let left = bytes - header.length - trailer.length;
    while (left > 0) {
      const { bytesWritten } = await file.write(noise, 0, Math.min(left, noise.length));
      left -= bytesWritten;
    }
    await file.write(trailer);
  } finally {
    await file.close();
  }
}

export interface UploadResult {
  status: number;
  body: string;
}

/**
 * POST to `url` (the gateway's /v1/files) the PDF at `path` as multipart/form-data, streamed from disk (the client
 * holds no more than a chunk of it), with `purpose=user_data`.
 */
export async function uploadPdf(url: string, headers: Record<string, string>, path: string, bytes: number): Promise<UploadResult> {
  const boundary = `----kmgbench${randomBytes(12).toString('hex')}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.pdf"\r\nContent-Type: application/pdf\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      agent: false,
      headers: {
        ...headers,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(head.length + bytes + tail.length),
      },
    });
    req.once('error', reject);
    req.once('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.once('error', reject);
    });
    req.write(head);
    pipeline(createReadStream(path), req, { end: false })
      .then(() => req.end(tail))
      .catch((err: unknown) => req.destroy(err as Error));
  });
}

/** A whole multipart/form-data upload body for a small PDF held in memory (for autocannon). */
export function multipartBody(pdf: Buffer): { body: Buffer; contentType: string } {
  const boundary = `----kmgbench${randomBytes(12).toString('hex')}`;
  const body = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.pdf"\r\nContent-Type: application/pdf\r\n\r\n`,
    ),
    pdf,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}
