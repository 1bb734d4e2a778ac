import type { Em } from '../../db/orm.js';
import { ApiError } from '../../lib/errors.js';

/**
 * Fixed one-minute windows counted in PostgreSQL with one atomic upsert, so every server
 * process shares the count (an in-memory limiter would multiply the limit by the number of
 * processes). Old windows are swept opportunistically.
 */
export async function consumeRateLimit(em: Em, bucket: string, limitPerMinute: number, now: Date): Promise<void> {
  const windowStart = new Date(Math.floor(now.getTime() / 60_000) * 60_000);
  const rows = await em.execute<Array<{ hits: number }>>(
    `insert into rate_limit_buckets (bucket, window_start, hits) values (?, ?, 1)
     on conflict (bucket, window_start) do update set hits = rate_limit_buckets.hits + 1
     returning hits`,
    [bucket, windowStart],
  );
  if (Math.random() < 0.01) {
    await em.execute('delete from rate_limit_buckets where window_start < ?', [new Date(windowStart.getTime() - 3_600_000)]);
  }
  const hits = Number(rows[0]?.hits ?? 0);
  if (hits > limitPerMinute) {
    const retryAfter = Math.max(1, Math.ceil((windowStart.getTime() + 60_000 - now.getTime()) / 1000));
    throw new ApiError('RATE_LIMITED', `Checkout creation is limited to ${limitPerMinute} per minute per agent and merchant; retry in ${retryAfter} s.`, {
      headers: { 'Retry-After': String(retryAfter) },
    });
  }
}
