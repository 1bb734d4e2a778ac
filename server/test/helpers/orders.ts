import { randomUUID } from 'node:crypto';
import type { Decision, TrustTier } from '@svc/contract';
import type { TestApp, TestKey } from './harness.js';

/** A compact JWS shape ingest accepts (ingest verifies no receipt). */
export const INGEST_RECEIPT = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJyY3B0X3gifQ.c2ln';

/**
 * Reports one order through ingest (the public route that lets a self-hosted gate record any
 * decision and tier), at `at` on the injected clock when given, and returns its order id.
 */
export async function ingestOrder(
  app: TestApp,
  key: TestKey,
  o: { merchantId: string; decision: Decision; tier: TrustTier; agent: string; label: string; at?: string; total?: string },
): Promise<string> {
  const realNow = app.services.now;
  if (o.at) app.services.now = () => new Date(o.at!);
  try {
    const total = o.total ?? '9.00';
    const session = {
      id: `sess_ext_${randomUUID()}`,
      merchantId: o.merchantId,
      agentId: o.agent,
      state: o.decision === 'accept' ? 'accepted' : o.decision === 'hold' ? 'held' : 'rejected',
      verdict: { decision: o.decision, tier: o.tier, reasonCodes: [o.decision === 'accept' ? 'OK' : o.decision === 'hold' ? 'HOLD_FOR_REVIEW' : 'OVER_PER_TX_CAP'] },
      total: { currency: 'USD', subtotal: total, tax: '0.00', total },
      lines: [{ sku: 'tea', qty: 3 }],
      railName: 'x402',
    };
    const res =
      o.decision === 'accept'
        ? await app.request('POST', '/v1/ingest/order', { key, body: { session, receipt: INGEST_RECEIPT, settlement: { reference: `0x${o.label}`, rail: 'x402' } } })
        : await app.request('POST', '/v1/ingest/decision', { key, body: { session } });
    if (res.status >= 300) throw new Error(`ingest ${o.label}: ${res.status} ${res.text}`);
  } finally {
    app.services.now = realNow;
  }
  const feed = await app.request('GET', `/v1/orders?merchant_id=${o.merchantId}&limit=1`, { key });
  return feed.body.data[0].id as string;
}
