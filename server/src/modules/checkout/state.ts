import type { SessionState } from '@svc/contract';
import { ApiError } from '../../lib/errors.js';
import type { SessionRow } from './entity.js';

/**
 * The session's payability and expiry rule, written once: every reader (the poll view, settle,
 * the x402 challenge, the hold review, the settlement worker) asks these functions. A session
 * past a window counts as moved on at once; a write commits it later (settle, a review, the worker).
 */
type Timed = Pick<SessionRow, 'state' | 'expiresAt' | 'holdExpiresAt'>;

/** States a payment can settle: a fresh session, or an approved hold waiting for a fresh authorization. */
export const awaitsPayment = (state: SessionState): boolean => state === 'awaiting_payment' || state === 'approved';

/** An unpaid session (or an approval nobody re-signed) past its lifetime: expired. */
export const paymentWindowLapsed = (s: Pick<SessionRow, 'state' | 'expiresAt'>, now: Date): boolean => awaitsPayment(s.state) && now > s.expiresAt;

/** A hold nobody reviewed in its window: rejected. */
export const reviewWindowLapsed = (s: Pick<SessionRow, 'state' | 'holdExpiresAt'>, now: Date): boolean => s.state === 'held' && !!s.holdExpiresAt && now > s.holdExpiresAt;

/** The state as of `now`: the stored one, unless a window passed. */
export function sessionStateAt(s: Timed, now: Date): SessionState {
  if (s.state === 'expired' || paymentWindowLapsed(s, now)) return 'expired';
  if (reviewWindowLapsed(s, now)) return 'rejected';
  return s.state;
}

/** A request for a payment (an unpaid x402 request) on a session that can no longer be paid answers what settle would. */
export function assertPayable(s: Timed, now: Date): void {
  if (s.state === 'settling') throw new ApiError('SETTLEMENT_IN_PROGRESS');
  if (sessionStateAt(s, now) === 'expired') throw new ApiError('SESSION_EXPIRED');
  if (!awaitsPayment(s.state)) throw new ApiError('SESSION_ALREADY_SETTLED', `The session is already ${s.state}; there is nothing left to pay.`);
}
