import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactVerify, createLocalJWKSet, decodeProtectedHeader } from 'jose';
import type { PrivateKeyAccount } from 'viem/accounts';
import type { Refund } from '@svc/contract';
import { MockFacilitator } from '../src/rails/index.js';
import { startSettlementWorker } from '../src/modules/settlement/reconciler.js';
import { startWebhookWorker } from '../src/modules/webhooks/worker.js';
import { verifyWebhook } from '@svc/sdk';
import { createEndpoint, Receiver } from './helpers/webhooks.js';
import { newBuyer, publishedMerchant, signRefund } from './helpers/agent.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { expectError, sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';

/**
 * Refunds over HTTP (issue 26, docs/settlement.md "Refunds"): the merchant's receiving key signs
 * the EIP-3009 transfer back to the payer; test mode settles it through the mock facilitator.
 */

let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
/** The merchant's receiving wallet: the refunds' signer. */
let wallet: PrivateKeyAccount;

beforeAll(async () => {
  app = await TestApp.start();
  wallet = newBuyer();
  shop = await publishedMerchant(app, {
    merchant: { receiving: { x402: { chain: 'base-sepolia', address: wallet.address }, mock: { account: 'acct_test' } } },
    products: [
      { sku: 'coffee', amount: '4.50' },
      { sku: 'beans', amount: '12.00' },
    ],
  });
});
afterAll(async () => app?.stop());

/** An order bought and settled over x402 by a new buyer; `total` e.g. "12.00". */
async function paidOrder(items = [{ sku: 'beans', qty: 1 }]): Promise<{ orderId: string; buyer: PrivateKeyAccount; total: string }> {
  const buyer = newBuyer();
  const s = await openSession(app, shop.base, items);
  const { res } = await payX402(app, shop.base, s, buyer);
  expect(res.status, res.text).toBe(200);
  return { orderId: res.body.order_id, buyer, total: s.pr.amount };
}


const create = (body: Record<string, unknown>, key: TestKey = shop.key, headers: Record<string, string> = {}) =>
  app.request<Refund>('POST', '/v1/refunds', { key, body, headers });
const authorize = (id: string, signature: string, key: TestKey = shop.key, headers: Record<string, string> = {}) =>
  app.request<Refund>('POST', `/v1/refunds/${id}/authorize`, { key, body: { signature }, headers });
/**
 * A storm's request as a client sends it: answered 503 DATABASE_UNAVAILABLE (its wait for a
 * connection or a lock passed SVC_DB_REQUEST_TIMEOUT_MS, as it may on a busy 2-core machine),
 * it is sent again, like any client retries a 503. Nothing else is retried.
 */
async function retrying503<T extends { status: number; body: any }>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const res = await send();
    if (res.status !== 503 || res.body?.reason_codes?.[0] !== 'DATABASE_UNAVAILABLE' || attempt === 5) return res;
    await new Promise((r) => setTimeout(r, 200 * attempt));
  }
}
const orderOf = async (orderId: string) => {
  const list = await app.request('GET', '/v1/orders?limit=100', { key: shop.key });
  return (list.body.data as Array<Record<string, unknown>>).find((o) => o.id === orderId)!;
};
const eventsOf = async (refundId: string) =>
  (await sql<{ type: string }>(app, "select type from events where payload->'data'->'object'->>'id' = ? order by seq", [refundId])).map((r) => r.type);

describe('refunds', () => {
  it('GIVEN a settled order WHEN refunded in full with the default amount THEN the typed data is the transfer back, the signed refund succeeds with a receipt, the order reads full and each event exists once', async () => {
    const { orderId, buyer } = await paidOrder();
    const created = await create({ order_id: orderId, reason: 'requested_by_customer', metadata: { ticket: 'T-1' } });
    expect(created.status, created.text).toBe(201);
    const r = created.body;
    expect(r).toMatchObject({ status: 'requires_authorization', order_id: orderId, amount: '12.00', amount_base_units: '12000000', currency: 'USD', reason: 'requested_by_customer', chain: 'base-sepolia', transaction: null, receipt: null, livemode: false });
    expect(r.id).toMatch(/^re_[0-9a-z]{26}$/);
    const td = r.authorization_request!.typed_data;
    expect(td.domain).toEqual({ name: 'USDC', version: '2', chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' });
    expect(td.message.from.toLowerCase()).toBe(wallet.address.toLowerCase());
    expect(td.message.to.toLowerCase()).toBe(buyer.address.toLowerCase());
    expect(td.message.value).toBe('12000000');
    expect(td.message.validBefore - Math.floor(Date.now() / 1000)).toBeGreaterThan(500);
    expect(td.message.validBefore - Math.floor(Date.now() / 1000)).toBeLessThanOrEqual(600);
    expect(td.message.nonce).toMatch(/^0x[0-9a-f]{64}$/);
    expect(r.authorization_request!.next).toBe(`POST /v1/refunds/${r.id}/authorize`);

    const done = await authorize(r.id, await signRefund(wallet, r));
    expect(done.status, done.text).toBe(200);
    expect(done.body).toMatchObject({ status: 'succeeded', authorization_request: null, failure: null });
    expect(done.body.transaction).toMatch(/^0x[0-9a-f]{64}$/);

    // The receipt verifies offline against the merchant JWKS.
    const jwks = await app.request('GET', `${shop.base}/.well-known/jwks.json`);
    const { payload, protectedHeader } = await compactVerify(done.body.receipt!, createLocalJWKSet(jwks.body), { algorithms: ['EdDSA'] });
    expect(protectedHeader).toEqual(decodeProtectedHeader(done.body.receipt!));
    expect(protectedHeader.typ).toBe('svc-refund-receipt+jws');
    expect(JSON.parse(new TextDecoder().decode(payload))).toMatchObject({
      iss: 'svc-checkout', sub: r.id, refundId: r.id, orderId, merchantId: shop.merchant.id, amount: '12.00', amountBaseUnits: '12000000', currency: 'USD', chain: 'base-sepolia', transaction: done.body.transaction, livemode: false,
    });

    expect(await orderOf(orderId)).toMatchObject({ amount_refunded: '12.00', refund_status: 'full' });
    expect(await eventsOf(r.id)).toEqual(['refund.created', 'refund.succeeded']);
    const got = await app.request<Refund>('GET', `/v1/refunds/${r.id}`, { key: shop.key });
    expect(got.body).toEqual(done.body);

    // Nothing is left: a default refund is over the limit.
    expectError(await create({ order_id: orderId }), 422, 'REFUND_EXCEEDS_REMAINING');
  });

  it('GIVEN a settled order WHEN refunded in parts THEN each part is rounded down to a base unit, the default is the rest, the order reads partial then full, and the list is newest first', async () => {
    const { orderId } = await paidOrder();
    const first = await create({ order_id: orderId, amount: '2.5000009' });
    expect(first.status, first.text).toBe(201);
    expect(first.body).toMatchObject({ amount: '2.50', amount_base_units: '2500000' });
    expect((await authorize(first.body.id, await signRefund(wallet, first.body))).body.status).toBe('succeeded');
    expect(await orderOf(orderId)).toMatchObject({ amount_refunded: '2.50', refund_status: 'partial' });

    expectError(await create({ order_id: orderId, amount: '9.500001' }), 422, 'REFUND_EXCEEDS_REMAINING');
    expectError(await create({ order_id: orderId, amount: '0.0000001' }), 400, 'VALIDATION_FAILED');

    const rest = await create({ order_id: orderId });
    expect(rest.body).toMatchObject({ amount: '9.50', amount_base_units: '9500000' });
    expect((await authorize(rest.body.id, await signRefund(wallet, rest.body))).body.status).toBe('succeeded');
    expect(await orderOf(orderId)).toMatchObject({ amount_refunded: '12.00', refund_status: 'full' });

    const list = await app.request('GET', `/v1/refunds?order_id=${orderId}&limit=1`, { key: shop.key });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.map((x: Refund) => x.id)).toEqual([rest.body.id]);
    expect(list.body.has_more).toBe(true);
    const next = await app.request('GET', `/v1/refunds?order_id=${orderId}&limit=1&cursor=${list.body.next_cursor}`, { key: shop.key });
    expect(next.body.data.map((x: Refund) => x.id)).toEqual([first.body.id]);
    expect(next.body.has_more).toBe(false);
  });

  it('GIVEN one order WHEN 50 refunds are created at once THEN the awaiting ones never pass the capture (the rest 422 REFUND_EXCEEDS_REMAINING) and authorizing them all moves exactly the total', async () => {
    const { orderId } = await paidOrder();
    // 12.00 in parts of 1.00: at most 12 of 50 fit.
    const answers = await Promise.all(Array.from({ length: 50 }, () => retrying503(() => create({ order_id: orderId, amount: '1.00' }))));
    const made = answers.filter((a) => a.status === 201);
    for (const a of answers.filter((x) => x.status !== 201)) expectError(a, 422, 'REFUND_EXCEEDS_REMAINING');
    expect(made.length).toBe(12);
    const [row] = await sql<{ n: string }>(app, "select coalesce(sum(amount_base_units), 0)::text as n from refunds where order_id = ? and status in ('requires_authorization', 'pending', 'succeeded')", [orderId]);
    expect(row!.n).toBe('12000000');

    const signed = await Promise.all(made.map(async (m) => [m.body.id, await signRefund(wallet, m.body)] as const));
    const done = await Promise.all(signed.map(([id, sig]) => retrying503(() => authorize(id, sig))));
    for (const d of done) expect(d.status, d.text).toBe(200);
    expect(await orderOf(orderId)).toMatchObject({ amount_refunded: '12.00', refund_status: 'full' });
    // 50 concurrent authorizations of one refund: one transfer, one succeeded event.
    const extra = (await paidOrder()).orderId;
    const one = await create({ order_id: extra });
    const sig = await signRefund(wallet, one.body);
    const many = await Promise.all(Array.from({ length: 50 }, () => retrying503(() => authorize(one.body.id, sig))));
    for (const m of many) {
      if (m.status === 409) expectError(m, 409, 'REFUND_NOT_AUTHORIZABLE');
      else expect([200, 202], m.text).toContain(m.status);
    }
    expect(await eventsOf(one.body.id)).toEqual(['refund.created', 'refund.succeeded']);
    expect(await orderOf(extra)).toMatchObject({ amount_refunded: '12.00', refund_status: 'full' });
  });

  it('GIVEN held, rejected, mock-rail and ingested orders WHEN refunded THEN 409 ORDER_NOT_REFUNDABLE (a hold once approved is refundable); another project or mode gets 404', async () => {
    const held = await publishedMerchant(app, {
      policy: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null },
      merchant: { receiving: { x402: { chain: 'base-sepolia', address: wallet.address }, mock: { account: 'acct_test' } } },
    });
    const hs = await openSession(app, held.base, [{ sku: 'coffee', qty: 1 }]);
    const heldRes = await payX402(app, held.base, hs, newBuyer());
    expect(heldRes.res.status, heldRes.res.text).toBe(202);
    const [heldOrder] = await sql<{ id: string }>(app, 'select id from orders where session_id = ?', [hs.id]);
    expectError(await create({ order_id: heldOrder!.id }, held.key), 409, 'ORDER_NOT_REFUNDABLE');
    // Once the merchant approves the hold, the order is accepted and settled: it can be refunded.
    const approved = await app.request('POST', `/v1/sessions/${hs.id}/approve`, { key: held.key });
    expect(approved.status, approved.text).toBe(200);
    const afterApproval = await create({ order_id: heldOrder!.id }, held.key);
    expect(afterApproval.status, afterApproval.text).toBe(201);
    expect((await authorize(afterApproval.body.id, await signRefund(wallet, afterApproval.body), held.key)).body).toMatchObject({ status: 'succeeded', amount: '4.50' });

    const capped = await publishedMerchant(app, { policy: { maxPerTransactionUsd: 1 } });
    const cs = await openSession(app, capped.base, [{ sku: 'beans', qty: 1 }]);
    const rejected = await payX402(app, capped.base, cs, newBuyer());
    expect(rejected.res.status, rejected.res.text).toBe(403);
    const [rejectedOrder] = await sql<{ id: string }>(app, 'select id from orders where session_id = ?', [cs.id]);
    expectError(await create({ order_id: rejectedOrder!.id }, capped.key), 409, 'ORDER_NOT_REFUNDABLE');

    const ms = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    const mockPaid = await app.request('POST', `${shop.base}/agent/checkout/${ms.id}/settle`, { body: { payment: { mock: true } } });
    expect(mockPaid.status, mockPaid.text).toBe(200);
    expectError(await create({ order_id: mockPaid.body.order_id }), 409, 'ORDER_NOT_REFUNDABLE');

    // An order reported through ingest, with a well-formed receipt: accepted, but not settled here.
    const b64u = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const session = {
      id: `sess_ext_${randomUUID()}`,
      merchantId: shop.merchant.id,
      agentId: randomUUID(),
      state: 'accepted',
      verdict: { decision: 'accept', tier: 'standard', reasonCodes: ['OK'] },
      total: { currency: 'USD', subtotal: '4.50', tax: '0.00', total: '4.50' },
      lines: [{ sku: 'coffee', qty: 1 }],
      railName: 'x402',
    };
    const receipt = `${b64u({ alg: 'EdDSA', kid: 'k1' })}.${b64u({ sub: 'rcpt_1', sessionId: session.id })}.${b64u('sig')}`;
    const ingested = await app.request('POST', '/v1/ingest/order', { key: shop.key, body: { session, receipt, settlement: { reference: '0x1' } } });
    expect(ingested.status, ingested.text).toBe(201);
    const [ingestedOrder] = await sql<{ id: string }>(app, 'select id from orders where session_id = ?', [session.id]);
    expectError(await create({ order_id: ingestedOrder!.id }), 409, 'ORDER_NOT_REFUNDABLE');

    const { orderId } = await paidOrder();
    const other = await app.key('test');
    expectError(await create({ order_id: orderId }, other), 404, 'NOT_FOUND');
    const live = await app.key('live', { projectId: shop.key.projectId });
    expectError(await create({ order_id: orderId }, live), 404, 'NOT_FOUND');
    expectError(await create({ order_id: 'ord_nope' }), 404, 'NOT_FOUND');
    const r = await create({ order_id: orderId, amount: '1' });
    expectError(await app.request('GET', `/v1/refunds/${r.body.id}`, { key: other }), 404, 'NOT_FOUND');
    expectError(await app.request('GET', `/v1/refunds/${r.body.id}`, { key: live }), 404, 'NOT_FOUND');
    expectError(await authorize(r.body.id, await signRefund(wallet, r.body), other), 404, 'NOT_FOUND');
    expect((await app.request('GET', `/v1/refunds?order_id=${orderId}`, { key: other })).body.data).toEqual([]);
  });

  it('GIVEN a refund WHEN signed by another key or over other fields THEN 422 SIGNER_MISMATCH, nothing moves and it stays authorizable', async () => {
    const { orderId, buyer } = await paidOrder();
    const r = (await create({ order_id: orderId, amount: '3.00' })).body;
    expectError(await authorize(r.id, await signRefund(buyer, r)), 422, 'SIGNER_MISMATCH');
    const otherFields = { ...r, authorization_request: { ...r.authorization_request!, typed_data: { ...r.authorization_request!.typed_data, message: { ...r.authorization_request!.typed_data.message, value: '12000000' } } } };
    expectError(await authorize(r.id, await signRefund(wallet, otherFields)), 422, 'SIGNER_MISMATCH');
    expectError(await authorize(r.id, '0x1234'), 422, 'SIGNER_MISMATCH');
    const still = await app.request<Refund>('GET', `/v1/refunds/${r.id}`, { key: shop.key });
    expect(still.body.status).toBe('requires_authorization');
    expect(await orderOf(orderId)).toMatchObject({ amount_refunded: '0.00', refund_status: 'none' });
    expect((await authorize(r.id, await signRefund(wallet, r))).body.status).toBe('succeeded');
  });

  it('GIVEN a merchant wallet without the funds WHEN authorized THEN 402 INSUFFICIENT_FUNDS and the refund stays authorizable; an unreachable facilitator is 503 and leaves it authorizable too', async () => {
    const { orderId } = await paidOrder();
    const r = (await create({ order_id: orderId, amount: '5.00' })).body;
    const mock = app.services.facilitators.test;
    app.services.facilitators.test = new MockFacilitator({ balances: { [wallet.address]: 4_999_999n } });
    try {
      expectError(await authorize(r.id, await signRefund(wallet, r)), 402, 'INSUFFICIENT_FUNDS');
    } finally {
      app.services.facilitators.test = mock;
    }
    expect((await app.request<Refund>('GET', `/v1/refunds/${r.id}`, { key: shop.key })).body.status).toBe('requires_authorization');
    // A facilitator that cannot be reached sends nothing: 503, and the refund is authorizable again.
    app.services.facilitators.test = Object.assign(Object.create(mock) as MockFacilitator, {
      settle: async () => {
        throw new Error('connect ECONNREFUSED');
      },
    });
    try {
      expectError(await authorize(r.id, await signRefund(wallet, r)), 503, 'FACILITATOR_UNAVAILABLE');
    } finally {
      app.services.facilitators.test = mock;
    }
    expect((await app.request<Refund>('GET', `/v1/refunds/${r.id}`, { key: shop.key })).body).toMatchObject({ status: 'requires_authorization', failure: null });
    expect((await authorize(r.id, await signRefund(wallet, r))).body.status).toBe('succeeded');
    expect(await eventsOf(r.id)).toEqual(['refund.created', 'refund.succeeded']);
  });

  it('GIVEN a refund past its window WHEN authorized THEN 410 REFUND_AUTHORIZATION_EXPIRED and it is canceled; an unsigned one is canceled by the settlement worker', async () => {
    const { orderId } = await paidOrder();
    const r = (await create({ order_id: orderId, amount: '1.00' })).body;
    const lapsed = (await create({ order_id: orderId, amount: '1.00' })).body;
    const sig = await signRefund(wallet, r);
    const realNow = app.services.now;
    app.services.now = () => new Date(Date.now() + 601_000);
    try {
      expectError(await authorize(r.id, sig), 410, 'REFUND_AUTHORIZATION_EXPIRED');
      const worker = startSettlementWorker(app.services, { intervalMs: 3_600_000 });
      await worker.runOnce();
      await worker.stop();
    } finally {
      app.services.now = realNow;
    }
    for (const id of [r.id, lapsed.id]) {
      const got = await app.request<Refund>('GET', `/v1/refunds/${id}`, { key: shop.key });
      expect(got.body).toMatchObject({ status: 'canceled', failure: { reason_codes: ['REFUND_AUTHORIZATION_EXPIRED'] }, authorization_request: null });
    }
    // Canceled refunds hold nothing back.
    expect((await create({ order_id: orderId })).body.amount).toBe('12.00');
  });

  it('GIVEN a refund awaiting authorization WHEN canceled THEN it is canceled (again: the same answer), cannot be authorized, and releases its amount', async () => {
    const { orderId } = await paidOrder();
    const r = (await create({ order_id: orderId })).body;
    expectError(await create({ order_id: orderId, amount: '0.01' }), 422, 'REFUND_EXCEEDS_REMAINING');
    const c = await app.request<Refund>('POST', `/v1/refunds/${r.id}/cancel`, { key: shop.key });
    expect(c.status, c.text).toBe(200);
    expect(c.body).toMatchObject({ status: 'canceled', failure: null, authorization_request: null });
    expect((await app.request('POST', `/v1/refunds/${r.id}/cancel`, { key: shop.key })).body).toEqual(c.body);
    expectError(await authorize(r.id, await signRefund(wallet, r)), 409, 'REFUND_NOT_AUTHORIZABLE');
    expect(await eventsOf(r.id)).toEqual(['refund.created']);
    const again = await create({ order_id: orderId });
    expect(again.body.amount).toBe('12.00');
    const done = await authorize(again.body.id, await signRefund(wallet, again.body));
    expectError(await app.request('POST', `/v1/refunds/${again.body.id}/cancel`, { key: shop.key }), 409, 'REFUND_NOT_AUTHORIZABLE');
    expect(done.body.status).toBe('succeeded');
  });

  it('GIVEN an Idempotency-Key WHEN a create or an authorize is repeated THEN the same answer, one refund and one transfer', async () => {
    const { orderId } = await paidOrder();
    const headers = { 'idempotency-key': `refund-${orderId}` };
    const a = await create({ order_id: orderId, amount: '4.00' }, shop.key, headers);
    const b = await create({ order_id: orderId, amount: '4.00' }, shop.key, headers);
    expect(a.status).toBe(201);
    expect(b.text).toBe(a.text);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expectError(await create({ order_id: orderId, amount: '5.00' }, shop.key, headers), 409, 'IDEMPOTENCY_KEY_REUSED');
    expect((await app.request('GET', `/v1/refunds?order_id=${orderId}`, { key: shop.key })).body.data).toHaveLength(1);

    const sig = await signRefund(wallet, a.body);
    const authHeaders = { 'idempotency-key': `authorize-${a.body.id}` };
    const x = await authorize(a.body.id, sig, shop.key, authHeaders);
    const y = await authorize(a.body.id, sig, shop.key, authHeaders);
    expect(x.status, x.text).toBe(200);
    expect(y.text).toBe(x.text);
    // Without a key, the same signature answers where the refund stands.
    const z = await authorize(a.body.id, sig);
    expect(z.status).toBe(200);
    expect(z.body.transaction).toBe(x.body.transaction);
    expect(await eventsOf(a.body.id)).toEqual(['refund.created', 'refund.succeeded']);
    expect(await orderOf(orderId)).toMatchObject({ amount_refunded: '4.00', refund_status: 'partial' });
  });

  it('GIVEN a transfer not confirmed in time WHEN authorized THEN 202 pending, and the settlement worker finishes it from the chain: succeeded once, one event, listed by GET /v1/events', async () => {
    const { orderId } = await paidOrder();
    const r = (await create({ order_id: orderId, amount: '6.00' })).body;
    const sig = await signRefund(wallet, r);
    const mock = app.services.facilitators.test;
    // The transfer was sent and nothing is known within the wait (or the process died after phase 1).
    app.services.facilitators.test = Object.assign(Object.create(mock) as MockFacilitator, { settle: async () => ({ status: 'pending' as const, reference: null }) });
    try {
      const pending = await authorize(r.id, sig);
      expect(pending.status, pending.text).toBe(202);
      expect(pending.body).toMatchObject({ status: 'pending', transaction: null, authorization_request: null });
      expect((await authorize(r.id, sig)).status).toBe(202);
    } finally {
      app.services.facilitators.test = mock;
    }
    expect(await orderOf(orderId)).toMatchObject({ amount_refunded: '0.00', refund_status: 'none' });
    await sql(app, "update refunds set lease_until = now() - interval '1 second' where id = ?", [r.id]);
    const worker = startSettlementWorker(app.services, { intervalMs: 3_600_000 });
    await worker.runOnce();
    await worker.runOnce();
    await worker.stop();
    const done = await app.request<Refund>('GET', `/v1/refunds/${r.id}`, { key: shop.key });
    expect(done.body).toMatchObject({ status: 'succeeded', transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(await eventsOf(r.id)).toEqual(['refund.created', 'refund.succeeded']);
    expect(await orderOf(orderId)).toMatchObject({ amount_refunded: '6.00', refund_status: 'partial' });
    const events = await app.request('GET', '/v1/events?type=refund.succeeded&limit=100', { key: shop.key });
    expect(events.status, events.text).toBe(200);
    const event = events.body.data.find((e: { data: { object: { id: string } } }) => e.data.object.id === r.id);
    expect(event.data.object).toMatchObject({ id: r.id, order_id: orderId, amount: '6.00', currency: 'USD', reason: null, transaction: done.body.transaction, livemode: false });
    expect(event.data.object).not.toHaveProperty('authorization_request');
    const detail = await app.request('GET', `/v1/events/${event.id}`, { key: shop.key });
    expect(detail.status, detail.text).toBe(200);
  });

  it('GIVEN an endpoint subscribed to refund.succeeded WHEN a refund succeeds THEN it receives exactly that event, signed like the order events, with the refund as data.object', async () => {
    const receiver = await Receiver.start();
    const worker = startWebhookWorker(app.services, { pollIntervalMs: 50 });
    try {
      const ep = await createEndpoint(app, shop.key, receiver.url('/refunds'), ['refund.succeeded']);
      const { orderId } = await paidOrder();
      const r = (await create({ order_id: orderId, amount: '1.50', reason: 'duplicate' })).body;
      const done = await authorize(r.id, await signRefund(wallet, r));
      const [hit] = await receiver.waitForHits(1, '/refunds');
      expect(verifyWebhook(hit!.raw, String(hit!.headers['svc-signature']), ep.secret).ok).toBe(true);
      const event = JSON.parse(hit!.raw.toString('utf8'));
      expect(Object.keys(event)).toEqual(['id', 'type', 'created', 'livemode', 'api_version', 'data']);
      expect(event).toMatchObject({ type: 'refund.succeeded', livemode: false, api_version: 'v1' });
      expect(event.data.object).toMatchObject({ id: r.id, order_id: orderId, status: 'succeeded', amount: '1.50', currency: 'USD', reason: 'duplicate', transaction: done.body.transaction, livemode: false });
      await new Promise((res) => setTimeout(res, 300));
      expect(receiver.hits.filter((h) => h.path === '/refunds')).toHaveLength(1);
    } finally {
      await worker.stop();
      await receiver.close();
    }
  });

  it('GIVEN the refunds trigger WHEN a write would pass the capture behind the service\'s back THEN the database refuses it', async () => {
    const { orderId } = await paidOrder();
    const r = (await create({ order_id: orderId })).body;
    await expect(sql(app, "update refunds set amount_base_units = 12000001 where id = ?", [r.id])).rejects.toThrow(/refunds_within_capture/);
  });
});
