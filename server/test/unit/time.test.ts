import { describe, expect, it } from 'vitest';
import { isIanaTimeZone } from '@svc/contract';
import { addDays, lastDays, localDate, startOfDay } from '../../src/lib/time.js';

describe('startOfDay', () => {
  it('GIVEN zones from UTC-11 to UTC+14 and half-hour offsets WHEN a date starts THEN it is local midnight', () => {
    const d = { year: 2026, month: 3, day: 1 };
    expect(startOfDay(d, 'UTC').toISOString()).toBe('2026-03-01T00:00:00.000Z');
    expect(startOfDay(d, 'Asia/Kolkata').toISOString()).toBe('2026-02-28T18:30:00.000Z');
    expect(startOfDay(d, 'Pacific/Kiritimati').toISOString()).toBe('2026-02-28T10:00:00.000Z');
    expect(startOfDay(d, 'Pacific/Pago_Pago').toISOString()).toBe('2026-03-01T11:00:00.000Z');
  });

  it('GIVEN daylight-saving changes WHEN days start THEN the offset of that day is used (a 23-hour and a 25-hour day)', () => {
    const la = (day: number) => startOfDay({ year: 2026, month: 3, day }, 'America/Los_Angeles').toISOString();
    expect([la(8), la(9)]).toEqual(['2026-03-08T08:00:00.000Z', '2026-03-09T07:00:00.000Z']);
    const london = (day: number) => startOfDay({ year: 2026, month: 10, day }, 'Europe/London').getTime();
    expect((london(26) - london(25)) / 3_600_000).toBe(25);
  });

  it('GIVEN a zone whose clocks skip midnight WHEN that day starts THEN it starts at 01:00 local, the first instant of the date', () => {
    // Chile: 2026-09-06 00:00 -04 does not exist; the day starts at 01:00 -03.
    const start = startOfDay({ year: 2026, month: 9, day: 6 }, 'America/Santiago');
    expect(start.toISOString()).toBe('2026-09-06T04:00:00.000Z');
    expect(localDate(new Date(start.getTime() - 1), 'America/Santiago')).toEqual({ year: 2026, month: 9, day: 5 });
    expect(localDate(start, 'America/Santiago')).toEqual({ year: 2026, month: 9, day: 6 });
  });
});

describe('lastDays', () => {
  it('GIVEN an instant WHEN the last days are listed THEN they end with the local today, contiguous, oldest first', () => {
    const days = lastDays(new Date('2026-03-15T03:00:00Z'), 'America/Los_Angeles', 14);
    expect(days).toHaveLength(14);
    expect(days[0]!.date).toBe('2026-03-01');
    expect(days.at(-1)).toEqual({ date: '2026-03-14', start: new Date('2026-03-14T07:00:00Z'), end: new Date('2026-03-15T07:00:00Z') });
    for (let i = 1; i < days.length; i++) expect(days[i]!.start).toEqual(days[i - 1]!.end);
    expect(addDays({ year: 2028, month: 3, day: 1 }, -1)).toEqual({ year: 2028, month: 2, day: 29 });
  });
});

describe('isIanaTimeZone', () => {
  it('GIVEN names and offsets WHEN checked THEN only IANA names pass', () => {
    for (const tz of ['UTC', 'Europe/Paris', 'America/Argentina/Buenos_Aires', 'Etc/GMT+5']) expect(isIanaTimeZone(tz), tz).toBe(true);
    for (const tz of ['', '+05:00', 'UTC+5', 'Mars/Olympus', 'Europe/Paris;drop', '../etc']) expect(isIanaTimeZone(tz), tz).toBe(false);
  });
});
