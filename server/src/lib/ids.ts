import { randomFillSync } from 'node:crypto';

export const ID_PREFIXES = ['mrch', 'prod', 'pol', 'ord', 'rcpt', 'evt', 'wha', 'key', 'proj', 'org', 'sess', 'whk', 'idem', 'req', 'sat', 'usr', 'dvc', 'sit', 'uss', 're'] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

/** Crockford's base32 in lower case: ids are ULIDs lower-cased, so they still sort by creation time. */
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const TIME_LEN = 10;
const RANDOM_LEN = 16;
const TIME_MAX = 2 ** 48 - 1;

/**
 * ULIDs (48-bit millisecond time + 80 random bits, Crockford base32), monotonic within a
 * process like ulid's `monotonicFactory`: an id minted in the same millisecond as the last
 * one (or while the clock stands behind it) is the last one's random part plus one, so ids
 * still sort by creation. The random characters come from a pooled `randomFillSync` buffer
 * (one call per 256 ids) instead of ulid's one `getRandomValues` call per character; one
 * byte gives one character (`& 31`, uniform since 256 is a multiple of 32). One instance per
 * process (the module below), as the monotonic order is only defined within one generator.
 */
export class UlidGenerator {
  private readonly pool = Buffer.allocUnsafe(RANDOM_LEN * 256);
  private poolAt = this.pool.length;
  private lastTime = -1;
  private readonly lastRandom = new Uint8Array(RANDOM_LEN);
  private lastTimeText = '';

  constructor(private readonly clock: () => number = Date.now) {}

  next(): string {
    const now = this.clock();
    if (now > this.lastTime) {
      if (!Number.isInteger(now) || now < 0 || now > TIME_MAX) throw new Error(`cannot encode time ${now} in a ULID`);
      this.lastTime = now;
      this.lastTimeText = encodeTime(now);
      if (this.poolAt + RANDOM_LEN > this.pool.length) {
        randomFillSync(this.pool);
        this.poolAt = 0;
      }
      for (let i = 0; i < RANDOM_LEN; i++) this.lastRandom[i] = this.pool[this.poolAt + i]! & 31;
      this.poolAt += RANDOM_LEN;
    } else {
      increment(this.lastRandom);
    }
    let random = '';
    for (let i = 0; i < RANDOM_LEN; i++) random += ALPHABET[this.lastRandom[i]!];
    return this.lastTimeText + random;
  }
}

function encodeTime(ms: number): string {
  let text = '';
  for (let i = 0; i < TIME_LEN; i++) {
    const mod = ms % 32;
    text = ALPHABET[mod] + text;
    ms = (ms - mod) / 32;
  }
  return text;
}

/** Adds one to a base32 number held as 5-bit digits, most significant first. */
function increment(digits: Uint8Array): void {
  for (let i = digits.length - 1; i >= 0; i--) {
    if (digits[i]! < 31) {
      digits[i]! += 1;
      return;
    }
    digits[i] = 0;
  }
  // 2^80 ids in one millisecond: ulid throws here too.
  throw new Error('ULID random part overflowed within one millisecond');
}

/** Monotonic within a process, so ids minted in the same millisecond still sort by creation. */
const ulid = new UlidGenerator();

/** `<prefix>_<ulid>`, the ULID lower-cased so ids sort by creation time. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid.next()}`;
}

/** A bare lower-case ULID, for references that are not our ids (the mock rail's). */
export function newUlid(): string {
  return ulid.next();
}

const ID_PATTERNS = new Map<string, RegExp>(ID_PREFIXES.map((p) => [p, new RegExp(`^${p}_[0-9a-z]{26}$`)]));

export function hasPrefix(id: string, prefix: IdPrefix): boolean {
  return ID_PATTERNS.get(prefix)!.test(id);
}
