import type { Em } from '../../db/orm.js';
import { ApiError } from '../../lib/errors.js';
import { deleteRateLimitBucketsBefore, hitRateLimitBucket } from './store.js';

/**
 * Fixed windows (one minute unless `windowSeconds` says otherwise) counted in PostgreSQL with one atomic upsert, so every server
 * process shares the count (an in-memory limiter would multiply the limit by the number of
 * processes). Old windows are swept opportunistically.
 */
export type RateLimitOptions = { windowSeconds?: number; human?: (retryAfter: number) => string };

/** The start of the fixed window `now` falls in. */
export function rateLimitWindow(now: Date, opts: RateLimitOptions = {}): Date {
  const windowMs = (opts.windowSeconds ?? 60) * 1000;
  return new Date(Math.floor(now.getTime() / windowMs) * windowMs);
}

export async function consumeRateLimit(em: Em, bucket: string, limitPerMinute: number, now: Date, opts: RateLimitOptions = {}): Promise<void> {
  const windowStart = rateLimitWindow(now, opts);
  await enforceRateLimit(em, await hitRateLimitBucket(em, bucket, windowStart), limitPerMinute, windowStart, now, opts);
}

/**
 * The verdict on a window's count after this request's hit (taken by `hitRateLimitBucket`, or
 * inside a larger statement such as the checkout's `readCheckoutInputs`): 429 over the limit.
 */
export async function enforceRateLimit(em: Em, hits: number, limitPerMinute: number, windowStart: Date, now: Date, opts: RateLimitOptions = {}): Promise<void> {
  const windowMs = (opts.windowSeconds ?? 60) * 1000;
  if (Math.random() < 0.01) await deleteRateLimitBucketsBefore(em, new Date(windowStart.getTime() - Math.max(3_600_000, 2 * windowMs)));
  if (hits > limitPerMinute) {
    const retryAfter = Math.max(1, Math.ceil((windowStart.getTime() + windowMs - now.getTime()) / 1000));
    const human = opts.human?.(retryAfter) ?? `Checkout creation is limited to ${limitPerMinute} per minute per agent and merchant; retry in ${retryAfter} s.`;
    throw new ApiError('RATE_LIMITED', human, {
      headers: { 'Retry-After': String(retryAfter) },
    });
  }
}
