import { monotonicFactory } from 'ulid';

/** Monotonic within a process, so ids minted in the same millisecond still sort by creation. */
const ulid = monotonicFactory();

export const ID_PREFIXES = ['mrch', 'prod', 'pol', 'ord', 'rcpt', 'evt', 'wha', 'key', 'proj', 'org', 'sess', 'whk', 'idem', 'req', 'sat', 'usr', 'dvc', 'sit', 'uss'] as const;
export type IdPrefix = (typeof ID_PREFIXES)[number];

/** `<prefix>_<ulid>`, the ULID lower-cased so ids sort by creation time. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid().toLowerCase()}`;
}

export function hasPrefix(id: string, prefix: IdPrefix): boolean {
  return new RegExp(`^${prefix}_[0-9a-z]{26}$`).test(id);
}
