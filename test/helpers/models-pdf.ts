/**
 * A small well-formed PDF with `pages` pages, a binary comment line (bytes above 0x7F, so a lossy
 * encoding anywhere would show) and `filler` bytes of padding.
 */
export function makePdf(pages: number, filler = 0): Buffer {
  const kids = Array.from({ length: pages }, (_, index) => `${index + 3} 0 R`).join(' ');
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${kids}] /Count ${pages} >>`,
    ...Array.from({ length: pages }, () => '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>'),
  ];
  const body = objects.map((object, index) => `${index + 1} 0 obj\n${object}\nendobj\n`).join('');
  return Buffer.concat([
    Buffer.from('%PDF-1.7\n'),
    Buffer.from([0x25, 0xe2, 0xe3, 0xcf, 0xd3, 0x0a]),
    Buffer.from(body),
    Buffer.from(`%${'x'.repeat(filler)}\n`),
    Buffer.from('trailer\n<< /Root 1 0 R >>\n%%EOF\n'),
  ]);
}
