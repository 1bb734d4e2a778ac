import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentRequired, SettleResponse } from '@x402/core/types';
import { sql } from './foundation.js';
import type { TestApp } from './harness.js';

export type Exchange = { url: string; method: string; requestHeaders: Record<string, string>; status: number; responseHeaders: Record<string, string> };

/**
 * A fetch that records every request and response it carries, to hand to an unmodified x402
 * client: the tests read the PAYMENT-SIGNATURE the client really sent and the headers it got.
 */
export function recordingFetch(): { fetch: typeof fetch; log: Exchange[] } {
  const log: Exchange[] = [];
  const recording = (async (input: string | URL | Request, init?: RequestInit) => {
    const req = new Request(input, init);
    const requestHeaders = Object.fromEntries(req.headers.entries());
    const res = await fetch(req);
    log.push({ url: req.url, method: req.method, requestHeaders, status: res.status, responseHeaders: Object.fromEntries(res.headers.entries()) });
    return res;
  }) as typeof fetch;
  return { fetch: recording, log };
}

export const paymentRequiredOf = (res: { headers: Headers }): PaymentRequired => {
  const h = res.headers.get('payment-required');
  if (!h) throw new Error('no PAYMENT-REQUIRED header');
  return decodePaymentRequiredHeader(h);
};

export const paymentResponseOf = (res: { headers: Headers }, name = 'payment-response'): SettleResponse => {
  const h = res.headers.get(name);
  if (!h) throw new Error(`no ${name} header`);
  return decodePaymentResponseHeader(h);
};

/** Rows of a table for a merchant's sessions created through x402 (idempotency key x402...). */
export async function x402Sessions(app: TestApp, merchantId: string) {
  return sql<{ id: string; agent_id: string; state: string; order_id: string | null; idempotency_key: string }>(
    app,
    "select id, agent_id, state, order_id, idempotency_key from checkout_sessions where merchant_id = ? and idempotency_key like 'x402%' order by created_at",
    [merchantId],
  );
}

export async function ordersOfMerchant(app: TestApp, merchantId: string) {
  return sql<{ id: string; session_id: string; decision: string; settlement_ref: string | null }>(
    app,
    'select id, session_id, decision, settlement_ref from orders where merchant_id = ? order by created_at',
    [merchantId],
  );
}
