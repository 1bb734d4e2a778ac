import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompactSign, generateKeyPair } from 'jose';
import { RECEIPT_TYP, verifyReceipt, verifyWebhook } from '@svc/sdk';
import { startWebhookWorker, type WebhookWorker } from '../src/modules/webhooks/worker.js';
import { newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, payX402, poll } from './helpers/agent-protocol.js';
import { expectError, sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';
import { createEndpoint, Receiver } from './helpers/webhooks.js';

/**
 * Issue 24 item 8: an `ingest:write` key could make an `order.settled` whose receipt is
 * `e30.e30.x` and whose settlement reference is invented, with the same keys as a hosted paid
 * order. Orders and their events now say where they came from, and the ingest route refuses a
 * receipt that is not a well-formed compact JWS.
 */
let app: TestApp;
let receiver: Receiver;
let worker: WebhookWorker;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
beforeAll(async () => {
  app = await TestApp.start();
  receiver = await Receiver.start();
  worker = startWebhookWorker(app.services, { pollIntervalMs: 50 });
  shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
});
afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await app?.stop();
});

const b64u = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** The best forgery an ingest:write key can send: our receipt's header and claims, signed by a key of its own. */
async function lookalikeReceipt(claims: Record<string, unknown>): Promise<string> {
  const { privateKey } = await generateKeyPair('EdDSA');
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader({ alg: 'EdDSA', typ: RECEIPT_TYP, kid: shop.merchant.receipt_kid })
    .sign(privateKey);
}

const accepted = (over: Record<string, unknown> = {}) => ({
  id: `sess_ext_${randomUUID()}`,
  merchantId: shop.merchant.id,
  agentId: randomUUID(),
  state: 'accepted',
  verdict: { decision: 'accept', tier: 'standard', reasonCodes: ['OK'] },
  total: { currency: 'USD', subtotal: '4.50', tax: '0.00', total: '4.50' },
  lines: [{ sku: 'coffee', qty: 1 }],
  railName: 'x402',
  ...over,
});

describe('ingested orders say so (issue 24.8)', () => {
  it('GIVEN a hosted paid order and an ingested one at the same merchant WHEN fulfillment reads the webhooks, the events API and the order feed THEN source is hosted and ingest, and only the hosted receipt verifies against the merchant JWKS', async () => {
    const ep = await createEndpoint(app, shop.key, receiver.url('/source'));

    // GIVEN a hosted order, paid through the gate.
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    const paid = await payX402(app, shop.base, s, newBuyer());
    expect(paid.res.status, paid.res.text).toBe(200);
    // AND an order an ingest:write key reported, with an invented settlement reference.
    const session = accepted();
    const forged = await lookalikeReceipt({ iss: 'svc-checkout', sub: 'rcpt_forged', sessionId: session.id, merchantId: shop.merchant.id, settlementRef: '0xinvented' });
    const ingested = await app.request('POST', '/v1/ingest/order', { key: shop.key, body: { session, receipt: forged, settlement: { reference: '0xinvented' } } });
    expect(ingested.status, ingested.text).toBe(201);

    // WHEN the four order events arrive
    const hits = await receiver.waitForHits(4, '/source');
    // THEN all are genuinely signed by the service (the signature cannot tell them apart) ...
    for (const h of hits) expect(verifyWebhook(h.raw, String(h.headers['svc-signature']), ep.secret).ok).toBe(true);
    const settled = hits.map((h) => JSON.parse(h.raw.toString('utf8'))).filter((b) => b.type === 'order.settled');
    expect(settled).toHaveLength(2);
    const hosted = { body: settled.find((b) => b.data.object.id === paid.res.body.order_id)! };
    const reported = { body: settled.find((b) => b.data.object.id === ingested.body.order_id)! };
    // ... and their objects say where they came from.
    expect(hosted.body.data.object.source).toBe('hosted');
    expect(reported.body.data.object.source).toBe('ingest');
    expect(Object.keys(reported.body.data.object).sort()).toEqual(Object.keys(hosted.body.data.object).sort());

    // AND the events API and the order feed say the same.
    for (const [h, source] of [[hosted, 'hosted'], [reported, 'ingest']] as const) {
      const ev = await app.request('GET', `/v1/events/${h.body.id}`, { key: shop.key });
      expect(ev.status, ev.text).toBe(200);
      expect(ev.body.data.object.source).toBe(source);
    }
    const feed = await app.request('GET', `/v1/orders?merchant_id=${shop.merchant.id}`, { key: shop.key });
    const byId = new Map(feed.body.data.map((o: any) => [o.id, o]));
    expect(byId.get(paid.res.body.order_id)).toMatchObject({ source: 'hosted', decision: 'accept' });
    expect(byId.get(ingested.body.order_id)).toMatchObject({ source: 'ingest', decision: 'accept', settlement_ref: '0xinvented' });

    // AND the check the docs give fulfillment: the hosted receipt (from the session) verifies
    // against the merchant's JWKS; an ingested order has no hosted session and no receipt of ours.
    const jwks = (await app.request('GET', `/v1/merchants/${shop.merchant.id}/jwks`)).body;
    const view = await poll(app, shop.base, hosted.body.data.object.session_id);
    const claims = await verifyReceipt(view.body.receipt, { jwks, expected: { orderId: hosted.body.data.object.id, merchantId: shop.merchant.id } });
    expect(claims.settlementRef).toBe(hosted.body.data.object.settlement_ref);
    await expect(verifyReceipt(forged, { jwks })).rejects.toMatchObject({ reason: 'RECEIPT_SIGNATURE_INVALID' });
    expect((await poll(app, shop.base, reported.body.data.object.session_id)).status).toBe(404);
  });

  it('GIVEN the issue\'s receipt e30.e30.x and other receipts that are not a compact JWS WHEN an order is ingested THEN 400 RECEIPT_MALFORMED and nothing is written', async () => {
    const malformed = {
      'the issue: empty JSON header, no alg': 'e30.e30.x',
      'alg none': `${b64u({ alg: 'none' })}.${b64u({ sub: 'x' })}.${b64u('sig')}`,
      'alg not a string': `${b64u({ alg: 7 })}.${b64u({ sub: 'x' })}.${b64u('sig')}`,
      'header not JSON': `${b64u('not json')}.${b64u({ sub: 'x' })}.${b64u('sig')}`,
      'header a JSON array': `${b64u([{ alg: 'EdDSA' }])}.${b64u({ sub: 'x' })}.${b64u('sig')}`,
      'payload not JSON': `${b64u({ alg: 'EdDSA' })}.${b64u('not json')}.${b64u('sig')}`,
      'payload a JSON array': `${b64u({ alg: 'EdDSA' })}.${b64u([1, 2])}.${b64u('sig')}`,
      'payload empty (detached)': `${b64u({ alg: 'EdDSA' })}..${b64u('sig')}`,
      'no signature': `${b64u({ alg: 'EdDSA' })}.${b64u({ sub: 'x' })}.`,
      'two segments': `${b64u({ alg: 'EdDSA' })}.${b64u({ sub: 'x' })}`,
      'five segments (a JWE)': `${b64u({ alg: 'RSA-OAEP', enc: 'A256GCM' })}.a.b.c.d`,
      'not base64url': `${b64u({ alg: 'EdDSA' })}.${b64u({ sub: 'x' })}.sig+na/ture=`,
      empty: '',
    };
    for (const [what, receipt] of Object.entries(malformed)) {
      const session = accepted();
      const res = await app.request('POST', '/v1/ingest/order', { key: shop.key, body: { session, receipt, settlement: { reference: '0xinvented' } } });
      expectError(res, 400, 'RECEIPT_MALFORMED');
      expect(res.body.error_human, what).toMatch(/^receipt: /);
      expect(await sql(app, 'select 1 from orders where session_id = ? union all select 1 from ingest_log where session_id = ?', [session.id, session.id]), what).toHaveLength(0);
    }
    // A well-formed JWS of any signature algorithm is taken as sent (its signature is the deployment's to check).
    const es256 = `${b64u({ alg: 'ES256', kid: 'k1' })}.${b64u({ sub: 'rcpt_1', sessionId: 'x' })}.${b64u('sig')}`;
    const ok = await app.request('POST', '/v1/ingest/order', { key: shop.key, body: { session: accepted(), receipt: es256, settlement: { reference: '0x1' } } });
    expect(ok.status, ok.text).toBe(201);
    expect(await sql(app, 'select jws, claims from receipts where id = ?', [ok.body.receipt_id])).toEqual([{ jws: es256, claims: { sub: 'rcpt_1', sessionId: 'x' } }]);
  });
});
