import type { Em } from '../../db/orm.js';
import { ApiError } from '../../lib/errors.js';
import { deleteRateLimitBucketsBefore, hitRateLimitBucket } from './store.js';
import type { Services } from '../../http/context.js';

/**
 * Fixed windows (one minute unless `windowSeconds` says otherwise) counted in PostgreSQL with one atomic upsert, so every server
 * process shares the count (an in-memory limiter would multiply the limit by the number of
 * processes). Old windows are swept by the settlement worker (`sweepRateLimitBuckets`), off
 * the request path.
 */
export type RateLimitOptions = { windowSeconds?: number; human?: (retryAfter: number) => string };

/** The start of the fixed window `now` falls in. */
export function rateLimitWindow(now: Date, opts: RateLimitOptions = {}): Date {
  const windowMs = (opts.windowSeconds ?? 60) * 1000;
  return new Date(Math.floor(now.getTime() / windowMs) * windowMs);
}

export async function consumeRateLimit(em: Em, bucket: string, limitPerMinute: number, now: Date, opts: RateLimitOptions = {}): Promise<void> {
  const windowStart = rateLimitWindow(now, opts);
  enforceRateLimit(await hitRateLimitBucket(em, bucket, windowStart), limitPerMinute, windowStart, now, opts);
}

/**
 * The verdict on a window's count after this request's hit (taken by `hitRateLimitBucket`, or
 * inside a larger statement such as the checkout's `readCheckoutInputs`): 429 over the limit.
 */
export function enforceRateLimit(hits: number, limitPerMinute: number, windowStart: Date, now: Date, opts: RateLimitOptions = {}): void {
  const windowMs = (opts.windowSeconds ?? 60) * 1000;
  if (hits > limitPerMinute) {
    const retryAfter = Math.max(1, Math.ceil((windowStart.getTime() + windowMs - now.getTime()) / 1000));
    const human = opts.human?.(retryAfter) ?? `Checkout creation is limited to ${limitPerMinute} per minute per agent and merchant; retry in ${retryAfter} s.`;
    throw new ApiError('RATE_LIMITED', human, {
      headers: { 'Retry-After': String(retryAfter) },
    });
  }
}

/** Windows older than this are gone: at least twice the longest window any caller uses (sign-in: 15 minutes). */
export const RATE_LIMIT_RETENTION_MS = 3_600_000;

/** Deletes the windows that started over `RATE_LIMIT_RETENTION_MS` ago (the settlement worker, at most once a minute). */
export async function sweepRateLimitBuckets(services: Pick<Services, 'orm' | 'now'>): Promise<void> {
  await deleteRateLimitBucketsBefore(services.orm.em.fork(), new Date(services.now().getTime() - RATE_LIMIT_RETENTION_MS));
}
