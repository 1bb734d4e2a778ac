import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Merchant, Order, OrdersSummary, StoredPolicyVersion, WebhookEndpointWithSecret, WebhookEvent } from '@svc/contract';
import { verifyWebhook, type WebhookEvent as ReceivedEvent } from '../src/webhooks.js';
import { listMethod, method } from '../src/resource.js';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  AgentClient,
  MerchantClient,
  type AcceptedOutcome,
  type HeldOutcome,
  type ListIterator,
  type MerchantHandle,
  MerchantsResource,
  type RequestOptions,
  type ResolvedOutcome,
  type SettleOutcome,
} from '../src/index.js';

// These checks run in `npx tsc -p tsconfig.json`: each @ts-expect-error line must fail to
// compile, so a wrong body or a wrong result type breaks the build. The functions are never
// called, so nothing reaches a server.
const svc = new MerchantClient({ apiKey: 'svc_test_typecheck', baseUrl: 'http://127.0.0.1:1' });

function wrongBodiesDoNotCompile() {
  // @ts-expect-error slug must be a string
  void svc.merchants.create({ slug: 1, name: 'x', domain: 'x.example.com', receiving: {} });
  // @ts-expect-error receiving is required
  void svc.merchants.create({ slug: 'x', name: 'x', domain: 'x.example.com' });
  // @ts-expect-error unknown field (the contract's schemas are strict)
  void svc.merchants.update('mrch_x', { slug: 'cannot-change' });
  // @ts-expect-error price.amount is a decimal string, never a number
  void svc.catalog.create({ sku: 'a', name: 'A', price: { amount: 4.5, currency: 'USD' } });
  // @ts-expect-error merchant_id belongs to the options, not to a made-up key
  void svc.catalog.list({ merchantId: 'mrch_x' });
  // @ts-expect-error not an event type
  void svc.webhooks.endpoints.create({ url: 'https://x.example.com', enabled_events: ['order.shipped'] });
  // @ts-expect-error the policy body must be an object
  void svc.policy.put({ body: 'STRICT' });
  // @ts-expect-error a typo in a policy field name (and a string where a number goes)
  void svc.policy.put({ body: { maxPerTransactionUSD: '500' } });
  // @ts-expect-error policy amounts are numbers of USD
  void svc.policy.put({ body: { maxPerTransactionUsd: '500' } });
  // @ts-expect-error not a receiving chain (base or base-sepolia)
  void svc.receiving.put({ receiving: { x402: { chain: 'ethereum', address: '0x1111111111111111111111111111111111111111' } } });
  // @ts-expect-error not a rail
  void svc.receiving.put({ receiving: { paypal: { account: 'x' } } });
  // @ts-expect-error the same receiving type on merchant create
  void svc.merchants.create({ slug: 'x', name: 'x', domain: 'x.example.com', receiving: { x402: { chain: 'ethereum', address: '0x1' } } });
  // @ts-expect-error qty is a number
  void ({} as MerchantHandle).checkout([{ sku: 'coffee', qty: '1' }]);
  // @ts-expect-error the mandate type is one of svc, ap2, acp, none
  void ({} as MerchantHandle).checkout([{ sku: 'coffee', qty: 1 }], { mandate: { type: 'jwt' } });
}

/** The namespaces are derived from the routes (sdk/src/resource.ts): the arguments follow the route. */
function derivedMethodsFollowTheirRoute() {
  // @ts-expect-error a route with a body needs it
  void svc.merchants.create();
  // @ts-expect-error the path parameter comes first
  void svc.catalog.update({ name: 'x' });
  // @ts-expect-error a route without query parameters takes none in its options
  void svc.merchants.get('mrch_x', { merchant_id: 'mrch_x' });
  // @ts-expect-error a list takes its query first and the per-call controls after it
  void svc.orders.list({ limit: 5 }, { decision: 'hold' });
  // @ts-expect-error listMethod is for a route that pages with cursor
  void listMethod('merchants.get');
  // @ts-expect-error not an operation of the contract
  void method('merchants.destroy');
  void svc.keys.roll('key_x');
  void svc.catalog.update('latte', { name: 'Latte' }, { merchant_id: 'mrch_x', idempotencyKey: 'k' });
  void svc.policy.versions({ merchant_id: 'mrch_x', limit: 5, signal: AbortSignal.timeout(1000) });
}

function typedBodiesCompile() {
  void svc.policy.put({ body: { maxPerTransactionUsd: 500, allowedRails: ['x402'], minReputationTier: null } });
  void svc.receiving.put({ receiving: { x402: { chain: 'base-sepolia', address: '0x1111111111111111111111111111111111111111', asset: 'usdc' }, mock: { account: 'a' } } });
}

function eventsAreTyped(event: WebhookEvent) {
  // @ts-expect-error data.object is an order only once `type` says so (a test event carries the endpoint)
  void event.data.object.items;
  if (event.type === 'webhook_endpoint.test') {
    expectTypeOf(event.data.object).toEqualTypeOf<{ id: string; object: 'webhook_endpoint'; url: string }>();
    return;
  }
  if (event.type === 'refund.created' || event.type === 'refund.succeeded' || event.type === 'refund.failed') {
    expectTypeOf(event.data.object.order_id).toEqualTypeOf<string>();
    return;
  }
  expectTypeOf(event.type).toEqualTypeOf<'order.accepted' | 'order.settled' | 'order.rejected' | 'order.held'>();
  expectTypeOf(event.data.object.mandate_type).toEqualTypeOf<'svc' | 'ap2' | 'acp' | 'none'>();
  expectTypeOf(event.data.object.items).toEqualTypeOf<Array<{ sku: string; qty: number }>>();
}

/** What a receiver parses after verifyWebhook, typed from @svc/sdk/webhooks alone. */
function receiverNarrowsOnType(raw: Buffer, header: string, secret: string) {
  if (!verifyWebhook(raw, header, secret).ok) return;
  const event = JSON.parse(raw.toString('utf8')) as ReceivedEvent;
  if (event.type === 'order.settled') expectTypeOf(event.data.object.session_id).toEqualTypeOf<string>();
  if (event.type === 'webhook_endpoint.test') expectTypeOf(event.data.object.url).toEqualTypeOf<string>();
}

function dashboardRoutesAreTyped() {
  // @ts-expect-error decision is accept, reject or hold
  void svc.orders.list({ decision: 'accepted' });
  // @ts-expect-error trust_tier is the contract's TrustTier
  void svc.orders.list({ trust_tier: 'elite' });
  void svc.orders.list({ decision: 'hold', trust_tier: 'cautious', created_gte: '2026-11-01T00:00:00Z', agent_id: 'a' });
  void svc.webhooks.events.list({ order_id: 'ord_x', type: 'webhook_endpoint.test' });
}

function outcomesNarrow(outcome: SettleOutcome) {
  if (outcome.status === 'accepted') {
    expectTypeOf(outcome.receipt).toEqualTypeOf<string>();
    // @ts-expect-error an accepted outcome has no review_url
    void outcome.review_url;
  } else if (outcome.status === 'hold') {
    expectTypeOf(outcome.review_url).toEqualTypeOf<string>();
    expectTypeOf(outcome.waitForResolution).returns.resolves.toEqualTypeOf<ResolvedOutcome>();
  } else {
    expectTypeOf(outcome.reason_codes).toEqualTypeOf<string[]>();
  }
}

describe('types inferred from the contract', () => {
  it('GIVEN the merchant client WHEN inspecting method types THEN bodies and results are the contract types', () => {
    expectTypeOf(svc.merchants.get).returns.resolves.toEqualTypeOf<Merchant>();
    expectTypeOf(svc.merchants.list).returns.toEqualTypeOf<ListIterator<Merchant, { data: Merchant[]; has_more: boolean; next_cursor: string | null }>>();
    expectTypeOf(svc.orders.list).returns.toEqualTypeOf<ListIterator<Order, { data: Order[]; has_more: boolean; next_cursor: string | null }>>();
    expectTypeOf(svc.webhooks.endpoints.create).returns.resolves.toEqualTypeOf<WebhookEndpointWithSecret>();
    expectTypeOf(svc.orders.summary).returns.resolves.toEqualTypeOf<OrdersSummary>();
    expectTypeOf(svc.policy.versions).returns.toEqualTypeOf<ListIterator<StoredPolicyVersion, { data: StoredPolicyVersion[]; has_more: boolean; next_cursor: string | null }>>();
    expectTypeOf(svc.webhooks.endpoints.sendTestEvent).returns.resolves.toEqualTypeOf<{ event_id: string; deliveries: Array<{ endpoint_id: string; status: 'pending' }> }>();
    expect(typeof receiverNarrowsOnType).toBe('function');
    expect(typeof dashboardRoutesAreTyped).toBe('function');
    expectTypeOf(svc.catalog.remove).returns.resolves.toEqualTypeOf<void>();
    expectTypeOf(svc.webhooks.endpoints.delete).returns.resolves.toEqualTypeOf<void>();
    expectTypeOf(svc.keys.roll).parameters.toEqualTypeOf<[string, { grace_period_seconds?: number | undefined }?, RequestOptions?]>();
    expectTypeOf(new MerchantsResource(svc.raw)).toEqualTypeOf(svc.merchants);
    expect(typeof derivedMethodsFollowTheirRoute).toBe('function');
    expectTypeOf(svc.livemode).toEqualTypeOf<boolean>();
    expectTypeOf<HeldOutcome['status']>().toEqualTypeOf<'hold'>();
    expectTypeOf<AcceptedOutcome['fulfillment']>().toEqualTypeOf<{ rail: string; reference: string }>();
    expectTypeOf<SettleOutcome['status']>().toEqualTypeOf<'accepted' | 'hold' | 'settlement_pending' | 'payment_invalid' | 'rejected'>();

    const agent = new AgentClient({ account: privateKeyToAccount(generatePrivateKey()) });
    expectTypeOf(agent.discover).returns.resolves.toEqualTypeOf<MerchantHandle>();
    expect(typeof wrongBodiesDoNotCompile).toBe('function');
    expect(typeof outcomesNarrow).toBe('function');
    expect(typeof typedBodiesCompile).toBe('function');
    expect(typeof eventsAreTyped).toBe('function');
    expect(agent.agentId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
