/**
 * Calendar days in an IANA time zone, with the runtime's Intl (ICU) time zone data: the same
 * data a browser formats dates with, so a dashboard and the server agree on what "today" is.
 * Pure functions of an instant; the caller passes the injected clock's `now`.
 */

/** A calendar date, month 1-12. */
export type CalendarDate = { year: number; month: number; day: number };

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatterOf(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: tz, year: 'numeric', month: 'numeric', day: 'numeric', hourCycle: 'h23' });
    formatters.set(tz, f);
  }
  return f;
}

/** The calendar date of `instant` on the wall clocks of `tz`. */
export function localDate(instant: Date, tz: string): CalendarDate {
  const parts = formatterOf(tz).formatToParts(instant);
  const num = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)!.value);
  return { year: num('year'), month: num('month'), day: num('day') };
}

/** `YYYY-MM-DD`. */
export function isoDate(d: CalendarDate): string {
  return `${String(d.year).padStart(4, '0')}-${String(d.month).padStart(2, '0')}-${String(d.day).padStart(2, '0')}`;
}

/** The date `n` days after `d` (negative: before), in the proleptic Gregorian calendar. */
export function addDays(d: CalendarDate, n: number): CalendarDate {
  const t = new Date(Date.UTC(d.year, d.month - 1, d.day + n));
  return { year: t.getUTCFullYear(), month: t.getUTCMonth() + 1, day: t.getUTCDate() };
}

const ordinal = (d: CalendarDate) => d.year * 10_000 + d.month * 100 + d.day;
const MINUTE = 60_000;

/**
 * The first instant of `d` in `tz`: usually local midnight, 01:00 where a daylight-saving
 * change skips midnight. Found by bisection over whole minutes (every zone changes its offset
 * on a whole minute) between UTC-14 h and UTC+12 h of that date, where the local date turns.
 */
export function startOfDay(d: CalendarDate, tz: string): Date {
  const target = ordinal(d);
  const utcMidnight = Date.UTC(d.year, d.month - 1, d.day);
  // Offsets span UTC-12 to UTC+14: local midnight is within these bounds, minute-aligned.
  let lo = (utcMidnight - 15 * 3_600_000) / MINUTE; // local date before d
  let hi = (utcMidnight + 13 * 3_600_000) / MINUTE; // local date d or later
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (ordinal(localDate(new Date(mid * MINUTE), tz)) >= target) hi = mid;
    else lo = mid;
  }
  return new Date(hi * MINUTE);
}

/** A calendar day in a zone and the instants it spans: [start, end). */
export type DayWindow = { date: string; start: Date; end: Date };

/** The `count` calendar days in `tz` that end with the one holding `now`, oldest first. */
export function lastDays(now: Date, tz: string, count: number): DayWindow[] {
  const today = localDate(now, tz);
  const out: DayWindow[] = [];
  for (let i = count - 1; i >= 0; i--) {
    const day = addDays(today, -i);
    out.push({ date: isoDate(day), start: startOfDay(day, tz), end: startOfDay(addDays(day, 1), tz) });
  }
  return out;
}

/** Unix seconds of an instant (rounded down): the `nowSec` of payment checks, JWT and envelope times, unix fields of the API. */
export function unixSeconds(instant: Date): number {
  return Math.floor(instant.getTime() / 1000);
}
