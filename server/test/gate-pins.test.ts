import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalHash } from '../src/lib/canonical-json.js';
import { newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, ordersOf, payX402, poll, settle, verifyReceipt } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';

/**
 * Pins for properties no other test could tell apart (issue 10, item 8): each one fails when
 * the code it names is broken.
 */
let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
beforeAll(async () => {
  app = await TestApp.start();
  shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 50 } });
});
afterAll(async () => app?.stop());

describe("the receipt's input fingerprint", () => {
  it('GIVEN an accepted settle WHEN the fingerprint is recomputed from the documented gate inputs THEN it matches, so every input (the payment included) is bound', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 2 }, { sku: 'beans', qty: 1 }]);
    const { res, payment } = await payX402(app, shop.base, s, newBuyer());
    expect(res.status, res.text).toBe(200);
    const { claims } = await verifyReceipt(app, shop.base, res.body.receipt);
    // docs/agent-protocol.md "Receipts": lines, total, rail, payment, mandate ref, reputation, velocity, policy hash.
    const inputsWith = (paid: unknown) => ({
      sessionId: s.id,
      lines: [
        { sku: 'coffee', qty: 2, unitPrice: '4.50' },
        { sku: 'beans', qty: 1, unitPrice: '12.00' },
      ],
      total: { currency: 'USD', subtotal: '21.00', tax: '0.00', total: '21.00' },
      rail: 'x402',
      payment: paid,
      mandate: { type: 'none', ref: null },
      // A first-time agent: neutral reputation and no earlier orders in the velocity windows.
      reputation: { score: 500, tier: 'standard', known: false },
      velocity: { lastHour: 0, lastDay: 0, daySpend: '0' },
      policyHash: claims.policyHash,
    });
    expect(claims.inputFingerprint).toBe(canonicalHash(inputsWith(payment.payment)));
    // Another payment under the same inputs gives another fingerprint: the payment is bound.
    const otherNonce = { ...payment.payment, authorization: { ...payment.payment.authorization, nonce: `0x${'ab'.repeat(32)}` } };
    expect(canonicalHash(inputsWith(otherNonce))).not.toBe(claims.inputFingerprint);
  });
});

describe('the replay check and the letter case of the payer', () => {
  for (const spelling of ['lower', 'upper'] as const) {
    it(`GIVEN an authorization already settled WHEN it comes back for another session with the payer in ${spelling} case THEN 402 NONCE_ALREADY_USED and no second order`, async () => {
      const buyer = newBuyer();
      const first = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
      const second = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
      const paid = await payX402(app, shop.base, first, buyer);
      expect(paid.res.status, paid.res.text).toBe(200);

      const from = paid.payment.payment.authorization.from;
      const respelled = spelling === 'lower' ? from.toLowerCase() : `0x${from.slice(2).toUpperCase()}`;
      expect(respelled).not.toBe(from);
      const replay = await settle(app, shop.base, second.id, {
        payment: { ...paid.payment.payment, authorization: { ...paid.payment.payment.authorization, from: respelled } },
      });
      expect(replay.status, replay.text).toBe(402);
      expect(replay.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);
      expect(await ordersOf(app, second.id)).toHaveLength(0);
      expect((await poll(app, shop.base, second.id)).body.state).toBe('awaiting_payment');
    });
  }
});

describe('event times follow the injected clock', () => {
  it('GIVEN the service clock set to a fixed instant WHEN orders are accepted and rejected THEN every event created is that instant', async () => {
    const realNow = app.services.now;
    // Two minutes ago: still inside the authorizations' validity window the helper signs.
    const pinned = new Date(Math.floor((Date.now() - 120_000) / 1000) * 1000);
    app.services.now = () => pinned;
    try {
      const accepted = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
      expect((await payX402(app, shop.base, accepted, newBuyer())).res.status).toBe(200);
      const rejected = await openSession(app, shop.base, [{ sku: 'beans', qty: 5 }]);
      const refused = await payX402(app, shop.base, rejected, newBuyer());
      expect(refused.res.status, refused.res.text).toBe(403);

      const rows = await sql<{ type: string; payload: any; created_at: Date }>(
        app,
        "select type, payload, created_at from events where payload->'data'->'object'->>'session_id' in (?, ?) order by seq",
        [accepted.id, rejected.id],
      );
      expect(rows.map((r) => r.type)).toEqual(['order.accepted', 'order.settled', 'order.rejected']);
      for (const r of rows) {
        const payload = typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload;
        expect(payload.created, r.type).toBe(pinned.getTime() / 1000);
        expect(new Date(r.created_at).getTime(), r.type).toBe(pinned.getTime());
      }
    } finally {
      app.services.now = realNow;
    }
  });
});
