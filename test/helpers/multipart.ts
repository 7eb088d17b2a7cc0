import { randomBytes } from 'node:crypto';

/** A PDF of exactly `bytes` bytes: a `%PDF-` header, then filler. */
export function pdfOf(bytes: number, fill = 0x20): Buffer {
  const pdf = Buffer.alloc(bytes, fill);
  Buffer.from('%PDF-1.7\n').copy(pdf);
  return pdf;
}

export interface Part {
  name: string;
  value: string | Buffer;
  /** Written raw into the part header, so tests can send any name a client could. */
  filename?: string;
  contentType?: string;
}

/** A multipart/form-data body written byte by byte, for what a well-behaved client would not send. */
export function multipart(parts: Part[]): { body: Buffer; contentType: string } {
  const boundary = `----kmg${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    let header = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"`;
    if (part.filename !== undefined) header += `; filename="${part.filename}"`;
    header += '\r\n';
    if (part.contentType !== undefined) header += `Content-Type: ${part.contentType}\r\n`;
    chunks.push(Buffer.from(`${header}\r\n`), Buffer.from(part.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** The parts of an ordinary upload: `file` (a PDF named `name`) and `purpose`. */
export function uploadParts(pdf: Buffer, name = 'report.pdf', extra: Part[] = []): Part[] {
  return [{ name: 'purpose', value: 'user_data' }, ...extra, { name: 'file', value: pdf, filename: name, contentType: 'application/pdf' }];
}

/** An upload as fetch sends it: `purpose`, `expires_after` when given, and `file` (a PDF named `filename`). */
export function uploadForm(pdf: Buffer, filename = 'report.pdf', expiresAfter?: number): FormData {
  const form = new FormData();
  form.set('purpose', 'user_data');
  if (expiresAfter !== undefined) {
    form.set('expires_after[anchor]', 'created_at');
    form.set('expires_after[seconds]', String(expiresAfter));
  }
  form.set('file', new Blob([pdf], { type: 'application/pdf' }), filename);
  return form;
}
