/** USDC has 6 decimals: every amount on the money path is an integer count of base units (bigint). */
export const USDC_DECIMALS = 6;
const SCALE = 10n ** BigInt(USDC_DECIMALS);
const DECIMAL = /^(\d{1,15})(?:\.(\d{1,6}))?$/;

/** `"12.5"` -> 12_500_000n; null for anything that is not a non-negative decimal with at most 6 decimals. */
export function toBaseUnits(decimal: string): bigint | null {
  const m = DECIMAL.exec(decimal.trim());
  if (!m) return null;
  return BigInt(m[1]!) * SCALE + BigInt((m[2] ?? '').padEnd(USDC_DECIMALS, '0'));
}

/** 12_500_000n -> `"12.50"`: at least two decimals, trailing zeros beyond them dropped. */
export function formatBaseUnits(units: bigint): string {
  const sign = units < 0n ? '-' : '';
  const abs = units < 0n ? -units : units;
  const frac = (abs % SCALE).toString().padStart(USDC_DECIMALS, '0').replace(/0+$/, '').padEnd(2, '0');
  return `${sign}${abs / SCALE}.${frac}`;
}
