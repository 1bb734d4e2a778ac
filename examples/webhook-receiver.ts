/**
 * Webhook receiver: verifies the Svc-Signature on the raw body, dedupes by event id, and
 * fulfils on order.settled of a hosted order (`source: 'hosted'`: this service ran the gate and
 * moved the funds). An `ingest` order was reported by a self-hosted checkout through
 * /v1/ingest and is fulfilled from that checkout's own records, never from this event. A
 * webhook_endpoint.test event is acknowledged and nothing more. docs/webhooks.md, "Fulfilling an order".
 *
 *   SVC_WEBHOOK_SECRET=whsec_... PORT=4242 npx tsx examples/webhook-receiver.ts
 *
 * Delivery is at least once: the same event id can arrive again (a retry, a replay), so
 * fulfilment keys on the event id (and the order id). This example keeps seen ids in memory;
 * a real receiver stores them with the fulfilment in one transaction.
 * Every handled delivery is printed as one JSON line.
 */
import express from 'express';
import { verifyWebhook, type WebhookEvent } from '@svc/sdk/webhooks';

const secret = process.env.SVC_WEBHOOK_SECRET;
if (!secret) {
  console.error('set SVC_WEBHOOK_SECRET (the whsec_ secret returned when the endpoint was created)');
  process.exit(1);
}
const port = Number(process.env.PORT ?? '4242');

const seen = new Set<string>();
const app = express();

// The signature covers the exact bytes sent: read the body raw, never re-serialize it.
app.post('/webhooks', express.raw({ type: 'application/json', limit: '1mb' }), (req, res) => {
  const raw = req.body as Buffer;
  const check = verifyWebhook(raw, req.header('svc-signature'), secret);
  if (!check.ok) {
    console.log(JSON.stringify({ rejected: check.reason }));
    res.status(400).json({ error: check.reason });
    return;
  }
  const event = JSON.parse(raw.toString('utf8')) as WebhookEvent;
  const duplicate = seen.has(event.id);
  seen.add(event.id);
  if (!duplicate && event.type === 'order.settled' && event.data.object.source === 'hosted') {
    // Fulfil here: ship the goods, grant access. A hosted order.settled is the only "go" signal.
  }
  // webhook_endpoint.test (POST /v1/webhooks/endpoints/{id}/test) names the endpoint, not an order: acknowledge it.
  const about =
    event.type === 'webhook_endpoint.test'
      ? { endpoint_id: event.data.object.id }
      : event.type.startsWith('refund.') && 'order_id' in event.data.object
        ? { refund_id: event.data.object.id, order_id: event.data.object.order_id }
        : { order_id: event.data.object.id, source: 'source' in event.data.object ? event.data.object.source : null };
  console.log(JSON.stringify({ received: event.type, event_id: event.id, ...about, delivery_id: req.header('svc-delivery-id') ?? null, duplicate }));
  res.status(200).json({ received: true, duplicate });
});

const server = app.listen(port, '127.0.0.1', () => {
  console.log(JSON.stringify({ listening: `http://127.0.0.1:${port}/webhooks` }));
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
