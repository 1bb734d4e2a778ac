import { describe, expect, it } from 'vitest';
import { decodeTime, encodeTime, isValid } from 'ulid';
import { hasPrefix, newId, UlidGenerator } from '../../src/lib/ids.js';

const ULID_LOWER = /^[0-7][0-9a-hjkmnp-tv-z]{25}$/;

describe('ids', () => {
  it('GIVEN a clock WHEN ids are minted THEN each is a lower-case ULID whose time part is that millisecond, as ulid encodes it', () => {
    const at = Date.UTC(2026, 10, 23, 18, 0, 0, 123);
    const id = new UlidGenerator(() => at).next();
    expect(id).toMatch(ULID_LOWER);
    expect(isValid(id.toUpperCase())).toBe(true);
    expect(decodeTime(id.toUpperCase())).toBe(at);
    expect(id.slice(0, 10)).toBe(encodeTime(at, 10).toLowerCase());
    expect(newId('req')).toMatch(/^req_[0-7][0-9a-hjkmnp-tv-z]{25}$/);
    expect(hasPrefix(newId('mrch'), 'mrch')).toBe(true);
    expect(hasPrefix(newId('mrch'), 'prod')).toBe(false);
    expect(hasPrefix(`mrch_${'0'.repeat(25)}`, 'mrch')).toBe(false);
  });

  it('GIVEN many ids in one millisecond, across several refills of the random pool THEN they are distinct and strictly increasing, each the previous plus one', () => {
    const gen = new UlidGenerator(() => 1_700_000_000_000);
    const ids = Array.from({ length: 2000 }, () => gen.next());
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    const tail = (id: string) => [...id.slice(10)].reduce((n, c) => n * 32n + BigInt('0123456789abcdefghjkmnpqrstvwxyz'.indexOf(c)), 0n);
    expect(tail(ids[1]!) - tail(ids[0]!)).toBe(1n);
    expect(tail(ids[1999]!) - tail(ids[0]!)).toBe(1999n);
  });

  it('GIVEN a clock that moves forward, stands still and steps back THEN ids keep increasing; a new millisecond draws fresh randomness', () => {
    const times = [1000, 1000, 2000, 1500, 1500, 3000, 4000];
    let i = 0;
    const gen = new UlidGenerator(() => times[i++]!);
    const ids = times.map(() => gen.next());
    for (let k = 1; k < ids.length; k++) expect(ids[k]! > ids[k - 1]!).toBe(true);
    // Behind the clock, the time part stays at the highest time seen.
    expect(decodeTime(ids[3]!.toUpperCase())).toBe(2000);
    expect(decodeTime(ids[5]!.toUpperCase())).toBe(3000);
    // Fresh randomness per millisecond: the random parts of 3000 and 4000 are unrelated (not +1).
    expect(ids[6]!.slice(10)).not.toBe(ids[5]!.slice(10));
  });

  it('GIVEN a million random characters THEN every base32 digit appears about equally often', () => {
    let ms = 1_700_000_000_000;
    const gen = new UlidGenerator(() => ms++);
    const counts = new Map<string, number>();
    for (let n = 0; n < 62_500; n++) for (const c of gen.next().slice(10)) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(32);
    for (const v of counts.values()) expect(Math.abs(v - 31_250)).toBeLessThan(1_250);
  });
});
