const twoDigits = (value: number) => String(value).padStart(2, '0');

/** A Unix time in UTC as `2026-01-31 14:05`: the same on every machine, as the server counts days. */
export function formatTime(seconds: number | null, none = 'never'): string {
  if (seconds === null) return none;
  const date = new Date(seconds * 1000);
  return `${date.getUTCFullYear()}-${twoDigits(date.getUTCMonth() + 1)}-${twoDigits(date.getUTCDate())} ${twoDigits(date.getUTCHours())}:${twoDigits(date.getUTCMinutes())}`;
}

const count = new Intl.NumberFormat('en');
const bytes = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });

/** 1234 as `1,234`. */
export const formatCount = (value: number) => count.format(value);

/** A byte count in binary units, as the limits are written (25 MiB per file, 1 GiB per day). */
export function formatBytes(value: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let unit = 0;
  let scaled = value;
  while (scaled >= 1024 && unit < units.length - 1) {
    scaled /= 1024;
    unit += 1;
  }
  return `${bytes.format(scaled)} ${units[unit]}`;
}

const usd = new Intl.NumberFormat('en', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6 });

/** USD with cents always and up to micro-dollars when there are any: `$0.0042`, `$50.00`. */
export const formatUsd = (value: number) => usd.format(value);

/** `value` as a share of `max`, in whole percent; a share that rounds to 0 but is not 0 reads `<1%`. */
export function formatShare(value: number, max: number): string {
  const percent = Math.round((value / max) * 100);
  return percent === 0 && value > 0 ? '<1%' : `${percent}%`;
}
