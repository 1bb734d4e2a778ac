import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { getMerchantSession, sessionForMerchantKey } from '../checkout/index.js';
import { approveHold, declineHold } from './review.js';

export { refundsRoutes } from './refund-routes.js';

const s = initServer();

/**
 * /v1/sessions/<id>: the merchant's view of a checkout session (checkout's read) and the hold
 * review (this module's workflow: review.ts `approveHold`, `declineHold`).
 */
export const sessionsRoutes = s.router(contract.sessions, {
  get: async ({ req, params }) => ({ status: 200, body: await getMerchantSession(authed(req), params.id) }),
  // 200 when captured, 202 while the chain or the agent is awaited.
  approve: async ({ req, params }) => {
    const ctx = authed(req);
    const { merchant } = await sessionForMerchantKey(ctx.em, ctx.auth, params.id);
    const out = await approveHold({ ctx, merchant, sessionId: params.id });
    if (out.kind === 'approved') return { status: 200, body: out.body };
    if (out.kind === 'approval_pending') return { status: 202, body: out.body };
    throw new ApiError('SESSION_NOT_HELD');
  },
  decline: async ({ req, params }) => {
    const ctx = authed(req);
    const { merchant } = await sessionForMerchantKey(ctx.em, ctx.auth, params.id);
    const out = await declineHold({ ctx, merchant, sessionId: params.id });
    if (out.kind !== 'declined') throw new ApiError('SESSION_NOT_HELD');
    return { status: 200, body: out.body };
  },
});
