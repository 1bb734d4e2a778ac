import { describe, expect, it } from 'vitest';
import {
  toDecimal,
  addDecimal,
  cartTotals,
  compareDecimal,
  currencyScale,
  decimalFromPolicyNumber,
  formatAtScale,
  lineTotal,
  toBaseUnits,
  toBaseUnitsDown,
  fromBaseUnits,
} from '../../src/lib/money.js';

describe('formatAtScale', () => {
  it('pads to the minimum scale and keeps extra places without rounding', () => {
    expect(formatAtScale('5', 2)).toBe('5.00');
    expect(formatAtScale('5.1', 2)).toBe('5.10');
    expect(formatAtScale('0.125', 2)).toBe('0.125');
    expect(formatAtScale('1200', 0)).toBe('1200');
  });
  it('refuses a value that is not a decimal string', () => {
    expect(() => formatAtScale('1e3', 2)).toThrow(TypeError);
    expect(() => formatAtScale('abc', 2)).toThrow('not a decimal string: abc');
  });
  it('refuses money given as a JS number, even one whose text would be a decimal', () => {
    expect(() => toDecimal(12 as never)).toThrow('not a decimal string: 12');
    expect(() => formatAtScale(4.5 as never, 2)).toThrow(TypeError);
  });
});

describe('lineTotal', () => {
  it('multiplies exactly at the unit price scale', () => {
    expect(lineTotal('12.50', 3)).toBe('37.50');
    expect(lineTotal('0.1', 3)).toBe('0.3'); // 0.1 * 3 in floats is 0.30000000000000004
    expect(lineTotal('0.00000001', 1000)).toBe('0.00001000');
    expect(lineTotal('999999999999.99999999', 1000)).toBe('999999999999999.99999000');
  });
  it('refuses a non-integer quantity', () => {
    expect(() => lineTotal('1.00', 1.5)).toThrow(TypeError);
    expect(() => lineTotal('1.00', -1)).toThrow('qty must be a non-negative integer: -1');
  });
  it('GIVEN quantity 0 THEN zero at the unit price scale (non-negative, not positive)', () => {
    expect(lineTotal('12.50', 0)).toBe('0.00');
  });
});

describe('cartTotals', () => {
  it('GIVEN USD prices with 2 places THEN totals at 2 places and tax 0.00', () => {
    expect(cartTotals([{ unitPrice: '12.50', qty: 2 }, { unitPrice: '0.10', qty: 3 }], 'USD')).toEqual({
      subtotal: '25.30',
      tax: '0.00',
      total: '25.30',
    });
  });
  it('shows at least the currency scale even when prices are written with fewer places', () => {
    expect(cartTotals([{ unitPrice: '5', qty: 1 }, { unitPrice: '1.5', qty: 1 }], 'usd')).toEqual({ subtotal: '6.50', tax: '0.00', total: '6.50' });
  });
  it('GIVEN a unit price with more places than the currency THEN the exact sum is kept', () => {
    expect(cartTotals([{ unitPrice: '0.125', qty: 3 }], 'USD')).toEqual({ subtotal: '0.375', tax: '0.00', total: '0.375' });
    expect(cartTotals([{ unitPrice: '0.125', qty: 2 }, { unitPrice: '1.10', qty: 1 }], 'USD').total).toBe('1.350');
    expect(cartTotals([{ unitPrice: '0.00000001', qty: 1 }, { unitPrice: '1.00', qty: 1 }], 'USD').total).toBe('1.00000001');
  });
  it('GIVEN any cart THEN the total is the exact sum of unit price x qty, never rounded (pins that no rounding branch can change a total)', () => {
    // Deterministic pseudo-random carts over scales 0-8 and currencies of scale 0, 2 and 3.
    let seed = 42;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    for (let i = 0; i < 500; i++) {
      const currency = ['USD', 'JPY', 'KWD'][rnd(3)]!;
      const lines = Array.from({ length: 1 + rnd(4) }, () => {
        const places = rnd(9);
        const digits = String(1 + rnd(10 ** 6));
        const unitPrice = places === 0 ? digits : `${digits.slice(0, -places) || '0'}.${digits.padStart(places, '0').slice(-places)}`;
        return { unitPrice, qty: 1 + rnd(1000) };
      });
      const exact = lines.reduce((acc, l) => acc.plus(toDecimal(l.unitPrice).times(l.qty)), toDecimal('0'));
      const t = cartTotals(lines, currency);
      expect(toDecimal(t.total).equals(exact), `${JSON.stringify(lines)} ${currency} -> ${t.total}`).toBe(true);
      expect(t.subtotal).toBe(t.total);
    }
  });
  it('uses scale 0 for JPY and KRW', () => {
    expect(cartTotals([{ unitPrice: '1200', qty: 2 }], 'JPY')).toEqual({ subtotal: '2400', tax: '0', total: '2400' });
    expect(cartTotals([{ unitPrice: '500', qty: 1 }], 'KRW').tax).toBe('0');
    expect(cartTotals([{ unitPrice: '100.5', qty: 1 }], 'JPY').total).toBe('100.5');
  });
  it('stays exact at the largest allowed price and quantity', () => {
    const lines = Array.from({ length: 100 }, () => ({ unitPrice: '999999999999.99999999', qty: 1000 }));
    expect(cartTotals(lines, 'USD').total).toBe('99999999999999999.99900000');
  });
  it('an empty cart totals zero at scale', () => {
    expect(cartTotals([], 'USD')).toEqual({ subtotal: '0.00', tax: '0.00', total: '0.00' });
  });
  it('knows the scale of a few currencies', () => {
    expect([currencyScale('USD'), currencyScale('eur'), currencyScale('JPY'), currencyScale('KRW'), currencyScale('KWD')]).toEqual([2, 2, 0, 0, 3]);
  });
});

describe('toBaseUnits', () => {
  it('converts a whole number of base units exactly', () => {
    expect(toBaseUnits('25.30')).toEqual({ baseUnits: '25300000', amount: '25.30' });
    expect(toBaseUnits('0.000001')).toEqual({ baseUnits: '1', amount: '0.000001' });
    expect(toBaseUnits('5')).toEqual({ baseUnits: '5000000', amount: '5.00' });
    expect(toBaseUnits('0')).toEqual({ baseUnits: '0', amount: '0.00' });
  });
  it('rounds a fraction of a base unit UP and shows the rounded amount', () => {
    expect(toBaseUnits('0.0000001')).toEqual({ baseUnits: '1', amount: '0.000001' });
    expect(toBaseUnits('1.23456701')).toEqual({ baseUnits: '1234568', amount: '1.234568' });
    expect(toBaseUnits('0.375')).toEqual({ baseUnits: '375000', amount: '0.375' });
  });
  it('trims trailing zeros beyond 2 places', () => {
    expect(toBaseUnits('1.50000000')).toEqual({ baseUnits: '1500000', amount: '1.50' });
    expect(toBaseUnits('1.12300000')).toEqual({ baseUnits: '1123000', amount: '1.123' });
  });
  it('is exact past 2^53 (bigint-safe)', () => {
    const r = toBaseUnits('999999999999.99999999');
    expect(r).toEqual({ baseUnits: '1000000000000000000', amount: '1000000000000.00' });
    expect(BigInt(r.baseUnits)).toBe(10n ** 18n);
    expect(toBaseUnits('99999999999999999.999').baseUnits).toBe('99999999999999999999000');
  });
  it('honours another token precision', () => {
    expect(toBaseUnits('1.5', 18).baseUnits).toBe('1500000000000000000');
    expect(toBaseUnits('1.5', 0)).toEqual({ baseUnits: '2', amount: '2.00' });
  });
  it('refuses a negative amount', () => {
    expect(() => toBaseUnits('-1.00')).toThrow('amount must not be negative: -1.00');
  });
  it('refuses a token precision that is not a non-negative integer', () => {
    expect(() => toBaseUnits('1.00', -1)).toThrow('decimals must be a non-negative integer: -1');
    expect(() => toBaseUnits('1.00', 1.5)).toThrow(TypeError);
  });
});

describe('compareDecimal / addDecimal / decimalFromPolicyNumber', () => {
  it('compares by value, not by text', () => {
    expect(compareDecimal('1.0', '1.00')).toBe(0);
    expect(compareDecimal('10.00', '9.99')).toBe(1);
    expect(compareDecimal('20.00', '20.000001')).toBe(-1);
    expect(compareDecimal('999999999999.99999999', '999999999999.99999998')).toBe(1);
  });
  it('adds exactly at the larger scale', () => {
    expect(addDecimal('0.1', '0.2')).toBe('0.3');
    expect(addDecimal('1.50', '2.255')).toBe('3.755');
    expect(addDecimal('0', '25.30')).toBe('25.30');
  });
  it('converts policy numbers through their shortest string form', () => {
    expect(decimalFromPolicyNumber(20)).toBe('20');
    expect(decimalFromPolicyNumber(100.1)).toBe('100.1');
    expect(decimalFromPolicyNumber(0.1 + 0.2)).toBe('0.30000000000000004');
    expect(decimalFromPolicyNumber(1e21)).toBe('1000000000000000000000');
    expect(() => decimalFromPolicyNumber(Number.NaN)).toThrow('policy amount must be a finite number: NaN');
    expect(() => decimalFromPolicyNumber(Infinity)).toThrow(TypeError);
  });
});

describe('toBaseUnitsDown (refunds: never more than asked)', () => {
  it('converts like toBaseUnits but rounds a fraction of a base unit DOWN', () => {
    expect(toBaseUnitsDown('12.00')).toEqual({ baseUnits: '12000000', amount: '12.00' });
    expect(toBaseUnitsDown('2.5000009')).toEqual({ baseUnits: '2500000', amount: '2.50' });
    expect(toBaseUnitsDown('1.23456789')).toEqual({ baseUnits: '1234567', amount: '1.234567' });
    expect(toBaseUnitsDown('0.0000009')).toEqual({ baseUnits: '0', amount: '0.00' });
    // where toBaseUnits rounds up, toBaseUnitsDown gives one base unit less
    expect(BigInt(toBaseUnits('1.23456701').baseUnits) - BigInt(toBaseUnitsDown('1.23456701').baseUnits)).toBe(1n);
  });
  it('shows the amount at the requested minimum scale, and is exact past 2^53', () => {
    expect(toBaseUnitsDown('5', 6, 3)).toEqual({ baseUnits: '5000000', amount: '5.000' });
    expect(toBaseUnitsDown('999999999999.99999999').baseUnits).toBe('999999999999999999');
  });
  it('refuses a negative amount', () => {
    expect(() => toBaseUnitsDown('-0.01')).toThrow('amount must not be negative: -0.01');
  });
});

describe('fromBaseUnits', () => {
  it('turns base units back into the exact amount', () => {
    expect(fromBaseUnits('9500000')).toBe('9.50');
    expect(fromBaseUnits('1')).toBe('0.000001');
    expect(fromBaseUnits('1000000000000000000')).toBe('1000000000000.00');
    expect(() => fromBaseUnits('1.5')).toThrow('not an integer string of base units');
  });
});
