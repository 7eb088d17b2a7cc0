/** One column of a printed table: its heading and how a row shows in it. */
export interface Column<Row> {
  heading: string;
  cell: (row: Row) => string;
  /** Numbers read best right-aligned. Default: left. */
  align?: 'left' | 'right';
}

/** A Markdown table (readable as is in a terminal, and pasted as is into BENCHMARKS.md). */
export function table<Row>(rows: readonly Row[], columns: readonly Column<Row>[]): string {
  const cells = rows.map((row) => columns.map((column) => column.cell(row)));
  const widths = columns.map((column, index) => Math.max(column.heading.length, 3, ...cells.map((line) => (line[index] ?? '').length)));
  const pad = (text: string, index: number) => {
    const width = widths[index] ?? 0;
    return columns[index]?.align === 'right' ? text.padStart(width) : text.padEnd(width);
  };
  const line = (values: string[]) => `| ${values.map(pad).join(' | ')} |`;
  const rule = `| ${widths.map((width, index) => (columns[index]?.align === 'right' ? `${'-'.repeat(width - 1)}:` : '-'.repeat(width))).join(' | ')} |`;
  return [line(columns.map((column) => column.heading)), rule, ...cells.map(line)].join('\n');
}

/** A number with a fixed count of decimals and thousands separators. */
export function num(value: number, decimals = 0): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

/** `value / base` as `0.53x`. */
export function ratio(value: number, base: number): string {
  return base > 0 && Number.isFinite(value) ? `${(value / base).toFixed(2)}x` : 'n/a';
}

/** Bytes as MiB. */
export function mib(bytes: number): string {
  return `${num(bytes / 1_048_576, 1)} MiB`;
}

/** The spread of a figure over the rounds, `min–max` (one value when they agree), `n/a` when a round lacks it. */
export function spread(values: number[], format: (value: number) => string): string {
  if (values.length === 0 || !values.every(Number.isFinite)) return 'n/a';
  const low = Math.min(...values);
  const high = Math.max(...values);
  return format(low) === format(high) ? format(low) : `${format(low)}–${format(high)}`;
}
