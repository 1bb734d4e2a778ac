import { Decimal as DecimalJs } from 'decimal.js';

/**
 * Money is exact decimal strings, computed with decimal.js and never with a JS number.
 * A private Decimal clone with ample precision: the library default (20 significant digits)
 * would silently round a 12-integer-digit, 8-decimal amount once it is scaled or summed.
 */
const D = DecimalJs.clone({ precision: 200, rounding: DecimalJs.ROUND_HALF_UP, toExpNeg: -1000, toExpPos: 1000 });
export type Decimal = InstanceType<typeof D>;

/** A plain decimal string: optional minus, digits, optional fraction. No exponent, no sign +. */
const DECIMAL_RE = /^-?\d+(\.\d+)?$/;

/** Decimal places per ISO 4217 code where they differ from 2. */
const CURRENCY_SCALES: Record<string, number> = {
  BIF: 0, CLP: 0, DJF: 0, GNF: 0, ISK: 0, JPY: 0, KMF: 0, KRW: 0, PYG: 0, RWF: 0, UGX: 0,
  UYI: 0, VND: 0, VUV: 0, XAF: 0, XOF: 0, XPF: 0,
  BHD: 3, IQD: 3, JOD: 3, KWD: 3, LYD: 3, OMR: 3, TND: 3,
};

/** The currency's minor-unit scale: 2 unless the code is listed above (JPY/KRW 0, BHD/KWD 3). */
export function currencyScale(currency: string): number {
  return CURRENCY_SCALES[currency.toUpperCase()] ?? 2;
}

/** Parses a money string strictly; a malformed value is a programming error upstream. */
export function toDecimal(value: Decimal | string): Decimal {
  if (value instanceof D) return value;
  if (typeof value !== 'string' || !DECIMAL_RE.test(value)) throw new TypeError(`not a decimal string: ${String(value)}`);
  return new D(value);
}

/** Places after the decimal point as written ("12.50" -> 2, "3" -> 0). */
export function placesOf(value: string): number {
  const dot = value.indexOf('.');
  return dot < 0 ? 0 : value.length - dot - 1;
}

/** Exact value with at least `minScale` decimals; more only if the value needs them (no rounding). */
export function formatAtScale(d: Decimal | string, minScale: number): string {
  const v = toDecimal(d);
  return v.toFixed(Math.max(minScale, v.decimalPlaces()));
}

/** unitPrice x qty, exact, shown at the unit price's own scale ("12.50" x 3 = "37.50"). */
export function lineTotal(unitPrice: string, qty: number): string {
  if (!Number.isSafeInteger(qty) || qty < 0) throw new TypeError(`qty must be a non-negative integer: ${qty}`);
  return toDecimal(unitPrice).times(qty).toFixed(placesOf(unitPrice));
}

/**
 * Cart totals (decisions.md "Money"): shown at the currency's scale, or at the widest unit
 * price's scale when a price has more places (like its line total); always the exact sum.
 * Tax is zero: there is no tax engine, shown at the currency scale.
 */
export function cartTotals(
  lines: { unitPrice: string; qty: number }[],
  currency: string,
): { subtotal: string; tax: string; total: string } {
  const scale = currencyScale(currency);
  let sum = new D(0);
  let maxPlaces = 0;
  for (const line of lines) {
    sum = sum.plus(toDecimal(lineTotal(line.unitPrice, line.qty)));
    maxPlaces = Math.max(maxPlaces, placesOf(line.unitPrice));
  }
  // Each line total is exact at its unit price's places, so the sum has at most maxPlaces
  // places: at the currency's scale (or the widest unit price's, when wider) it is exact and
  // the rule's half-up rounding never has a digit to round. Nothing is rounded here.
  const shown = Math.max(scale, maxPlaces);
  const subtotal = sum;
  const tax = new D(0);
  const total = subtotal.plus(tax);
  return { subtotal: subtotal.toFixed(shown), tax: tax.toFixed(scale), total: total.toFixed(shown) };
}

/**
 * Converts a decimal amount to integer token base units (USDC: 6). An amount that is not a
 * whole number of base units is rounded UP (the merchant is never short-paid), and `amount`
 * shows the rounded value with at least 2 decimals and no trailing zeros beyond that.
 */
export function toBaseUnits(amount: string, decimals = 6): { baseUnits: string; amount: string } {
  if (!Number.isSafeInteger(decimals) || decimals < 0) throw new TypeError(`decimals must be a non-negative integer: ${decimals}`);
  const v = toDecimal(amount);
  if (v.isNegative()) throw new RangeError(`amount must not be negative: ${amount}`);
  const base = v.times(new D(10).pow(decimals)).toDecimalPlaces(0, D.ROUND_CEIL);
  const rounded = base.dividedBy(new D(10).pow(decimals));
  return { baseUnits: base.toFixed(0), amount: formatAtScale(rounded, 2) };
}

/**
 * A refund's amount in integer token base units (USDC: 6), converted as `toBaseUnits` converts a
 * total but rounded DOWN: a refund never gives back more than asked. `amount` is that rounded
 * value with at least `minScale` decimals.
 */
export function toBaseUnitsDown(amount: string, decimals = 6, minScale = 2): { baseUnits: string; amount: string } {
  if (!Number.isSafeInteger(decimals) || decimals < 0) throw new TypeError(`decimals must be a non-negative integer: ${decimals}`);
  const v = toDecimal(amount);
  if (v.isNegative()) throw new RangeError(`amount must not be negative: ${amount}`);
  const base = v.times(new D(10).pow(decimals)).toDecimalPlaces(0, D.ROUND_FLOOR);
  return { baseUnits: base.toFixed(0), amount: fromBaseUnits(base.toFixed(0), decimals, minScale) };
}

/** Integer base units back to the exact decimal amount, with at least `minScale` decimals. */
export function fromBaseUnits(baseUnits: string, decimals = 6, minScale = 2): string {
  if (!/^\d+$/.test(baseUnits)) throw new TypeError(`not an integer string of base units: ${baseUnits}`);
  return formatAtScale(new D(baseUnits).dividedBy(new D(10).pow(decimals)), minScale);
}

export function compareDecimal(a: string, b: string): -1 | 0 | 1 {
  return toDecimal(a).comparedTo(toDecimal(b)) as -1 | 0 | 1;
}

/** Exact sum, shown at the larger scale of the two inputs ("1.5" + "2.25" = "3.75"). */
export function addDecimal(a: string, b: string): string {
  return toDecimal(a).plus(toDecimal(b)).toFixed(Math.max(placesOf(a), placesOf(b)));
}

/**
 * Policy caps are JSON numbers in USD. String(n) is the shortest round-trip form of the
 * number the merchant wrote (100.1 -> "100.1"), so it enters Decimal without float arithmetic.
 */
export function decimalFromPolicyNumber(n: number): string {
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new TypeError(`policy amount must be a finite number: ${String(n)}`);
  return new D(String(n)).toFixed();
}
