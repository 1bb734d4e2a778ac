import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { eventTypes, openSession, ordersOf, payX402, poll, settle, verifyReceipt, type Session } from './helpers/agent-protocol.js';
import { expectError, sql } from './helpers/foundation.js';
import { startSettlementWorker } from '../src/modules/settlement/reconciler.js';
import { TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
beforeAll(async () => {
  app = await TestApp.start();
  // Unknown agents are `cautious`, strictly below `standard`: they are held.
  shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null } });
});
afterAll(async () => app?.stop());

/** The agent's test-mode score (a test key reads test mode; a read without a key answers live). */
const reputationOf = async (agent: string) => (await app.request('GET', `/v1/reputation/agent/${agent}`, { key: shop.key })).body;

/** Opens and settles a session for a new agent: it is held. */
async function heldSession(): Promise<{ s: Session; agent: string; res: Awaited<ReturnType<typeof payX402>>['res']; payment: unknown }> {
  const agent = agentId();
  const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent });
  const { res, payment } = await payX402(app, shop.base, s, newBuyer());
  return { s, agent, res, payment };
}

describe('hold for review', () => {
  it('GIVEN a new agent under holdForReviewBelowTier standard WHEN it settles THEN 202 hold with a review url and the poll call, an order.held event, and the poll shows held', async () => {
    const { s, agent, res, payment } = await heldSession();
    expect(res.status, res.text).toBe(202);
    expect(Object.keys(res.body).sort()).toEqual(['error_human', 'next', 'reason_codes', 'review_url', 'status']);
    expect(res.body).toMatchObject({
      status: 'hold',
      review_url: `${app.baseUrl}/dashboard/test/holds/${s.id}`,
      reason_codes: ['HOLD_FOR_REVIEW'],
      next: `GET ${shop.base}/agent/checkout/${s.id}`,
    });
    expect(res.body.error_human.length).toBeGreaterThan(0);

    const [order] = await ordersOf(app, s.id);
    expect(order).toMatchObject({ decision: 'hold', trust_tier: 'cautious', settlement_ref: null });
    expect(await eventTypes(app, s.id)).toEqual(['order.held']);

    const view = await poll(app, shop.base, s.id);
    expect(view.body).toMatchObject({ state: 'held', orderId: order!.id, receipt: null, verdict: { decision: 'hold', tier: 'cautious', reasonCodes: ['HOLD_FOR_REVIEW'] } });
    expect(view.body.next).toBe(res.body.next);
    expect(view.body.paymentRequired).toBeUndefined();

    // The hold is terminal for the agent: the same payment replays it, another is 409.
    const again = await settle(app, shop.base, s.id, payment);
    expect(again.status).toBe(202);
    expect(again.text).toBe(res.text);
    expectError((await payX402(app, shop.base, s, newBuyer())).res, 409, 'SESSION_ALREADY_SETTLED');
    // A hold is neutral for reputation (the agent becomes known at 500).
    expect(await reputationOf(agent)).toMatchObject({ score: 500 });

    // The merchant's feed shows it as held.
    const feed = await app.request('GET', `/v1/orders?merchant_id=${shop.merchant.id}`, { key: shop.key });
    expect(feed.body.data.find((o: any) => o.session_id === s.id)).toMatchObject({ decision: 'hold', trust_tier: 'cautious' });
    // The review url is readable with an orders:read key.
    const review = await app.request('GET', `/v1/sessions/${s.id}`, { key: shop.key });
    expect(review.status).toBe(200);
    expect(review.body).toMatchObject({ id: s.id, state: 'held' });
  });

  it('GIVEN a held session WHEN the merchant approves it THEN 200 with a verifiable receipt, the session accepted, the order accepted and the settle events', async () => {
    const { s, agent, payment } = await heldSession();
    const approved = await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key });
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body).toMatchObject({ status: 'accepted', order_id: expect.stringMatching(/^ord_/), fulfillment: { rail: 'x402', reference: expect.stringMatching(/^0x[0-9a-f]{64}$/) } });
    const { header, claims } = await verifyReceipt(app, shop.base, approved.body.receipt);
    expect(header.kid).toBe(shop.merchant.receipt_kid);
    expect(claims).toMatchObject({ sessionId: s.id, orderId: approved.body.order_id, decision: 'accept', agentId: agent, settlementRef: approved.body.fulfillment.reference });

    const [order] = await ordersOf(app, s.id);
    expect(order).toMatchObject({ id: approved.body.order_id, decision: 'accept', settlement_ref: approved.body.fulfillment.reference });
    expect(await eventTypes(app, s.id)).toEqual(['order.held', 'order.accepted', 'order.settled']);
    const view = await poll(app, shop.base, s.id);
    expect(view.body).toMatchObject({ state: 'accepted', receipt: approved.body.receipt, orderId: order!.id });
    expect((await reputationOf(agent)).score).toBe(510);

    // The agent's original payment now replays the acceptance.
    const replay = await settle(app, shop.base, s.id, payment);
    expect(replay.status).toBe(200);
    expect(replay.body.receipt).toBe(approved.body.receipt);

    expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key }), 409, 'SESSION_NOT_HELD');
    expectError(await app.request('POST', `/v1/sessions/${s.id}/decline`, { key: shop.key }), 409, 'SESSION_NOT_HELD');
    expect(await ordersOf(app, s.id)).toHaveLength(1);
  });

  it('GIVEN a held session WHEN approve and decline race THEN exactly one wins and the events follow the winner', async () => {
    const { s } = await heldSession();
    const [approve, decline] = await Promise.all([
      app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key }),
      app.request('POST', `/v1/sessions/${s.id}/decline`, { key: shop.key }),
    ]);
    expect([approve.status, decline.status].sort()).toEqual([200, 409]);
    const events = await eventTypes(app, s.id);
    if (approve.status === 200) expect(events).toEqual(['order.held', 'order.accepted', 'order.settled']);
    else expect(events).toEqual(['order.held', 'order.rejected']);
    expect(await ordersOf(app, s.id)).toHaveLength(1);
  });

  it('GIVEN a held session WHEN the merchant declines it THEN the session is rejected, the order rejected with an order.rejected event', async () => {
    const { s, agent, payment } = await heldSession();
    const declined = await app.request('POST', `/v1/sessions/${s.id}/decline`, { key: shop.key });
    expect(declined.status, declined.text).toBe(200);
    const [order] = await ordersOf(app, s.id);
    expect(declined.body).toEqual({ status: 'rejected', session_id: s.id, order_id: order!.id });
    expect(order!.decision).toBe('reject');
    expect(await eventTypes(app, s.id)).toEqual(['order.held', 'order.rejected']);
    const view = await poll(app, shop.base, s.id);
    expect(view.body).toMatchObject({ state: 'rejected', receipt: null, verdict: { decision: 'reject', reasonCodes: ['MERCHANT_DECLINED'] } });
    expect((await reputationOf(agent)).score).toBe(485);
    // nothing was captured: the authorization's reservation is released (it may pay elsewhere)
    expect(await sql(app, 'select nonce from payment_nonces where session_id = ?', [s.id])).toEqual([]);
    expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key }), 409, 'SESSION_NOT_HELD');
    // The agent's payment now replays the merchant's decision.
    const replay = await settle(app, shop.base, s.id, payment);
    expect(replay.status).toBe(403);
    expect(replay.body).toEqual({ status: 'rejected', reason_codes: ['MERCHANT_DECLINED'], error_human: expect.any(String) });
  });

  it('GIVEN a held session WHEN a key without orders:write, a key of another project or of the other mode resolves it THEN 403 INSUFFICIENT_SCOPE or 404, and it stays held', async () => {
    const { s } = await heldSession();
    const readOnly: TestKey = await app.key('test', { projectId: shop.key.projectId, scopes: ['orders:read'] });
    expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: readOnly }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await app.request('POST', `/v1/sessions/${s.id}/decline`, { key: readOnly }), 403, 'INSUFFICIENT_SCOPE');
    const stranger = await app.key('test');
    expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: stranger }), 404, 'NOT_FOUND');
    expectError(await app.request('POST', `/v1/sessions/${s.id}/decline`, { key: stranger }), 404, 'NOT_FOUND');
    expectError(await app.request('GET', `/v1/sessions/${s.id}`, { key: stranger }), 404, 'NOT_FOUND');
    const live = await app.key('live', { projectId: shop.key.projectId });
    expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: live }), 404, 'NOT_FOUND');
    expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`), 401, 'UNAUTHENTICATED');
    expect((await poll(app, shop.base, s.id)).body.state).toBe('held');
    expect(await eventTypes(app, s.id)).toEqual(['order.held']);
  });

  it('GIVEN a session that is not held WHEN the merchant approves it THEN 409 SESSION_NOT_HELD', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key }), 409, 'SESSION_NOT_HELD');
    expect((await poll(app, shop.base, s.id)).body.state).toBe('awaiting_payment');
  });

  it("GIVEN a held session WHEN the merchant approves after the buyer's authorization expired THEN 202 awaiting_reauthorization, the agent signs a fresh authorization and the order settles without another hold", async () => {
    const { s, payment } = await heldSession();
    const [held] = await ordersOf(app, s.id);
    const realNow = app.services.now;
    // signPayment authorizes for 300 s; review takes longer.
    const later = new Date(Date.now() + 400_000);
    app.services.now = () => later;
    let approved;
    try {
      approved = await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key });
    } finally {
      app.services.now = realNow;
    }
    expect(approved.status, approved.text).toBe(202);
    expect(approved.body).toMatchObject({ status: 'awaiting_reauthorization', session_id: s.id, order_id: held!.id, reason_codes: ['REAUTHORIZATION_REQUIRED'] });
    // Nothing settled yet: the order is still held and no event beyond order.held exists.
    expect((await ordersOf(app, s.id))[0]!.decision).toBe('hold');
    // the expired authorization's reservation is released; the fresh one will take its own
    expect(await sql(app, 'select nonce from payment_nonces where session_id = ?', [s.id])).toEqual([]);
    expect(await eventTypes(app, s.id)).toEqual(['order.held']);

    // The poll hands the session back to the agent: a fresh requirement and the settle call.
    const view = await poll(app, shop.base, s.id);
    expect(view.body).toMatchObject({ state: 'approved', verdict: { decision: 'accept' } });
    expect(view.body.paymentRequired).toMatchObject({ amountBaseUnits: s.pr.amountBaseUnits, payTo: s.pr.payTo });
    expect(view.body.next).toMatch(new RegExp(`^POST ${shop.base}/agent/checkout/${s.id}/settle `));
    // The old, expired authorization cannot settle it; a second approval is a conflict.
    app.services.now = () => later;
    try {
      const stale = await settle(app, shop.base, s.id, payment);
      expect(stale.status, stale.text).toBe(402);
      expect(stale.body.reason_codes).toEqual(['PAYMENT_EXPIRED']);
    } finally {
      app.services.now = realNow;
    }
    expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key }), 409, 'SESSION_NOT_HELD');

    // A fresh authorization settles under the approved verdict: no second hold.
    const { res } = await payX402(app, shop.base, { ...s, pr: view.body.paymentRequired }, newBuyer());
    expect(res.status, res.text).toBe(200);
    expect(res.body.order_id, res.text).toBe(held!.id);
    expect((await verifyReceipt(app, shop.base, res.body.receipt)).claims.orderId).toBe(held!.id);
    expect((await ordersOf(app, s.id))[0]).toMatchObject({ decision: 'accept', settlement_ref: res.body.fulfillment.reference });
    expect(await eventTypes(app, s.id)).toEqual(['order.held', 'order.accepted', 'order.settled']);
    expect((await poll(app, shop.base, s.id)).body).toMatchObject({ state: 'accepted', orderId: held!.id, receipt: res.body.receipt });
  });

  it('GIVEN a held session whose review window lapses WHEN the settlement worker sweeps THEN it is rejected with order.rejected, without anyone acting, and the agent\'s score does not move', async () => {
    const { s, agent } = await heldSession();
    const scoreHeld = (await reputationOf(agent)).score;
    const realNow = app.services.now;
    app.services.now = () => new Date(Date.now() + 24 * 3600_000 + 60_000);
    try {
      const worker = startSettlementWorker(app.services, { intervalMs: 3_600_000 });
      await worker.stop();
      await worker.runOnce();
    } finally {
      app.services.now = realNow;
    }
    expect((await ordersOf(app, s.id))[0]!.decision).toBe('reject');
    expect(await eventTypes(app, s.id)).toEqual(['order.held', 'order.rejected']);
    const [row] = await sql(app, 'select state, verdict from checkout_sessions where id = ?', [s.id]);
    expect(row).toMatchObject({ state: 'rejected', verdict: { reasonCodes: ['REVIEW_WINDOW_EXPIRED'] } });
    // the sweep is nobody's act: no reject delta for the agent, and the reservation is released
    expect((await reputationOf(agent)).score).toBe(scoreHeld);
    expect(await sql(app, 'select nonce from payment_nonces where session_id = ?', [s.id])).toEqual([]);
  });

  it('GIVEN a held authorization with less than a minute left WHEN the merchant approves THEN 202 awaiting_reauthorization: nothing is broadcast that could expire on the way', async () => {
    const realNow = app.services.now;
    const at = new Date(Math.floor(Date.now() / 1000) * 1000);
    app.services.now = () => at;
    try {
      const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { agent_id: agentId() });
      // valid for 30 s more: enough to be held (over 6 s), not enough to be captured after review (60 s + 6 s)
      const { res } = await payX402(app, shop.base, s, newBuyer(), { validBefore: at.getTime() / 1000 + 30 });
      expect(res.status, res.text).toBe(202);
      const approved = await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key });
      expect(approved.status, approved.text).toBe(202);
      expect(approved.body).toMatchObject({ status: 'awaiting_reauthorization', reason_codes: ['REAUTHORIZATION_REQUIRED'] });
      expect(await eventTypes(app, s.id)).toEqual(['order.held']);
    } finally {
      app.services.now = realNow;
    }
  });

  it('GIVEN a held session nobody reviews WHEN the 24 h review window passes THEN the poll shows it rejected and a late approval is 409, recording the rejection', async () => {
    const { s, agent } = await heldSession();
    const realNow = app.services.now;
    const later = new Date(Date.now() + 24 * 3600_000 + 60_000);
    app.services.now = () => later;
    try {
      const view = await poll(app, shop.base, s.id);
      expect(view.body).toMatchObject({ state: 'rejected', verdict: { decision: 'reject', reasonCodes: ['REVIEW_WINDOW_EXPIRED'] } });
      expect(view.body.next).toBeUndefined();
      expectError(await app.request('POST', `/v1/sessions/${s.id}/approve`, { key: shop.key }), 409, 'SESSION_NOT_HELD');
    } finally {
      app.services.now = realNow;
    }
    expect((await poll(app, shop.base, s.id)).body).toMatchObject({ state: 'rejected', verdict: { reasonCodes: ['REVIEW_WINDOW_EXPIRED'] } });
    expect((await ordersOf(app, s.id))[0]!.decision).toBe('reject');
    expect(await eventTypes(app, s.id)).toEqual(['order.held', 'order.rejected']);
    expect((await reputationOf(agent)).score).toBe(485);
  });

  it('GIVEN a known agent (standard) WHEN it settles under the same policy THEN it is not held', async () => {
    const { agent } = await heldSession();
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent });
    const { res } = await payX402(app, shop.base, s, newBuyer());
    expect(res.status, res.text).toBe(200);
  });
});
