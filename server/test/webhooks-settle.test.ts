import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '@svc/sdk';
import { startWebhookWorker, type WebhookWorker } from '../src/modules/webhooks/worker.js';
import { newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { TestApp } from './helpers/harness.js';
import { createEndpoint, Receiver } from './helpers/webhooks.js';

let app: TestApp;
let receiver: Receiver;
let worker: WebhookWorker;
beforeAll(async () => {
  app = await TestApp.start();
  receiver = await Receiver.start();
  worker = startWebhookWorker(app.services, { pollIntervalMs: 50 });
});
afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await app?.stop();
});

describe('webhooks end to end through the hosted settle', () => {
  it('GIVEN an endpoint WHEN an agent settles THEN order.accepted then order.settled arrive, signed, carrying the order', async () => {
    const shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 1000 } });
    const ep = await createEndpoint(app, shop.key, receiver.url('/settle'));
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 2 }]);
    const { res } = await payX402(app, shop.base, s, newBuyer());
    expect(res.status, res.text).toBe(200);

    const hits = await receiver.waitForHits(2, '/settle');
    const bodies = hits.map((h) => JSON.parse(h.raw.toString('utf8')));
    expect(bodies.map((b) => b.type)).toEqual(['order.accepted', 'order.settled']);
    for (const [i, h] of hits.entries()) {
      expect(verifyWebhook(h.raw, String(h.headers['svc-signature']), ep.secret).ok).toBe(true);
      expect(h.headers['svc-event-id']).toBe(bodies[i].id);
      expect(bodies[i]).toMatchObject({ livemode: false, api_version: 'v1' });
      expect(bodies[i].data.object).toMatchObject({
        id: res.body.order_id,
        session_id: s.id,
        merchant_id: shop.merchant.id,
        receipt_id: expect.stringMatching(/^rcpt_/),
        settlement_ref: res.body.fulfillment.reference,
        rail_name: 'x402',
        items: [{ sku: 'coffee', qty: 2 }],
      });
    }
    const listed = await app.request('GET', '/v1/events?limit=2', { key: shop.key });
    expect(listed.body.data.map((e: any) => e.id)).toEqual([bodies[1].id, bodies[0].id]);
  });
});
