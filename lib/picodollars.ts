/**
 * Picodollars as a USD number: the exact decimal, read as the nearest double. For reports and
 * metrics; sums are kept in picodollars.
 * @example usdOfPico(300_000n) // 3e-7
 */
export function usdOfPico(pico: bigint | number): number {
  // Both exact doubles: one division, rounded once to the nearest (the metrics' path, every call).
  if (typeof pico === 'number' && Number.isSafeInteger(pico)) return pico / 1e12;
  // Past 2^53, a conversion to a double would round before the division: from the digits instead.
  const value = BigInt(pico);
  const sign = value < 0n ? '-' : '';
  const digits = (value < 0n ? -value : value).toString().padStart(13, '0');
  return Number(`${sign}${digits.slice(0, -12)}.${digits.slice(-12)}`);
}

/**
 * Non-negative USD as whole picodollars, from the decimal digits it is written with (cut at the
 * 12th decimal place): a budget as the spend counters count, exact however large.
 * @example picoOfUsd(5) // 5_000_000_000_000n
 */
export function picoOfUsd(usd: number): bigint {
  const text = String(usd);
  const [whole = '0', fraction = ''] = (text.includes('e') ? usd.toFixed(12) : text).split('.');
  return BigInt(whole + fraction.padEnd(12, '0').slice(0, 12));
}
