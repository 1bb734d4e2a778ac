import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequired } from '@x402/core/types';
import { appendPaymentIdentifierToExtensions, generatePaymentId } from '@x402/extensions/payment-identifier';
import { agentId, newBuyer, publishedMerchant, signPayment, USDC_SEPOLIA } from './helpers/agent.js';
import { eventTypes, hostRequest, ordersOf, poll, verifyReceipt } from './helpers/agent-protocol.js';
import { TestApp, TEST_PAY_TO } from './helpers/harness.js';
import { callPaidTool, callWithPayment, mcpClient, paymentRequiredOf, rawMcp, signAccepts, structured } from './helpers/mcp.js';
import { ordersOfMerchant, paymentRequiredOf as httpPaymentRequiredOf, paymentResponseOf, x402Sessions } from './helpers/x402.js';

/**
 * The merchant's MCP endpoint in test mode (mock facilitator, base-sepolia): the official MCP
 * client (Client + StreamableHTTPClientTransport) and an x402 MCP client written from x402's
 * specs/transports-v2/mcp.md (helpers/mcp.ts) against /m/<ref>/mcp and /mcp of the discovery
 * host. Every paid path is checked against what the HTTP x402 routes answer for the same payment.
 */
const DISCOVERY = 'pay.example.test';
const RATE = 8;
const OPEN_POLICY = { holdForReviewBelowTier: null, requireMandateOverUsd: null, minReputationTier: null, maxPerTransactionUsd: 1000 };
const PRODUCTS = [
  { sku: 'coffee', amount: '0.25' },
  { sku: 'beans', amount: '0.40' },
  { sku: 'mug', amount: '3.00', available: false },
];

let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
let mcpUrl: string;
let client: Client;

beforeAll(async () => {
  // A low per-agent checkout rate so the rate-limit case is a handful of calls (each other case uses fresh agents).
  app = await TestApp.start({ SVC_DISCOVERY_DOMAIN: DISCOVERY, SVC_CHECKOUT_RATE_PER_MINUTE: String(RATE) });
  shop = await publishedMerchant(app, { policy: OPEN_POLICY, products: PRODUCTS });
  mcpUrl = `${app.baseUrl}${shop.base}/mcp`;
  client = await mcpClient(mcpUrl);
});
afterAll(async () => {
  await client?.close();
  await app?.stop();
});

/** The JSON of a tool error's content[0].text. */
const errorOf = (r: { content: unknown; isError?: boolean }) => {
  expect(r.isError).toBe(true);
  const first = (r.content as Array<{ type: string; text: string }>)[0]!;
  return JSON.parse(first.text) as { reason_codes: string[]; error_human: string } & Record<string, unknown>;
};

/** A v2 PaymentPayload around a payment signed with helpers/agent.ts signPayment (for authorizations @x402/evm would not sign). */
async function payloadFromSigned(pr: PaymentRequired, signed: Awaited<ReturnType<typeof signPayment>>): Promise<PaymentPayload> {
  const a = signed.payment.authorization;
  return {
    x402Version: 2,
    resource: pr.resource,
    accepted: pr.accepts[0]!,
    payload: { signature: signed.payment.signature, authorization: { ...a, validAfter: String(a.validAfter), validBefore: String(a.validBefore) } },
  };
}

/** The session requirement as signPayment takes it, from an x402 requirement. */
const sessionPr = (pr: PaymentRequired) => ({
  payTo: pr.accepts[0]!.payTo,
  amountBaseUnits: pr.accepts[0]!.amount,
  chainId: 84532,
  verifyingContract: pr.accepts[0]!.asset,
  eip712Domain: pr.accepts[0]!.extra as { name: string; version: string },
});

describe('the official MCP client', () => {
  it('GIVEN a published merchant WHEN the official client connects to its mcp_url THEN it lists the five tools with the contract schemas, the catalog resource, and each read tool answers what the HTTP route answers', async () => {
    const manifest = await app.request('GET', `${shop.base}/.well-known/agentic-checkout.json`);
    expect(manifest.body.mcp_url).toBe(`${shop.base}/mcp`);

    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['buy', 'create_checkout', 'get_checkout', 'get_merchant', 'list_products']);
    for (const t of tools) {
      expect(t.description!.length, t.name).toBeGreaterThan(60);
      expect(t.inputSchema.type).toBe('object');
      expect(t.outputSchema?.type, t.name).toBe('object');
    }
    const create = tools.find((t) => t.name === 'create_checkout')!;
    // CreateCheckoutBody, as the contract declares it.
    expect(create.inputSchema.required).toEqual(['agent_id', 'items']);
    expect((create.inputSchema.properties as any).agent_id).toEqual({ type: 'string', format: 'uuid' });
    expect((create.inputSchema.properties as any).items.items.properties.qty).toEqual({ type: 'integer', minimum: 1, maximum: 1000 });
    const buy = tools.find((t) => t.name === 'buy')!;
    expect(Object.keys(buy.inputSchema.properties as object).sort()).toEqual(['agent_id', 'items', 'session_id']);

    const merchant = await client.callTool({ name: 'get_merchant', arguments: {} });
    expect(merchant.isError).toBeFalsy();
    expect(merchant.structuredContent).toEqual(manifest.body);
    expect(JSON.parse((merchant.content as any)[0].text)).toEqual(manifest.body);

    const catalog = await app.request('GET', `${shop.base}/agent/catalog`);
    const listed = await client.callTool({ name: 'list_products', arguments: {} });
    expect(listed.structuredContent).toEqual(catalog.body);
    expect((listed.structuredContent as any).items.map((i: any) => i.sku).sort()).toEqual(['beans', 'coffee']);
    const retired = await client.callTool({ name: 'list_products', arguments: { available: false } });
    expect((retired.structuredContent as any).items.map((i: any) => i.sku)).toEqual(['mug']);
    const shopCategory = await client.callTool({ name: 'list_products', arguments: { category: 'shop' } });
    expect((shopCategory.structuredContent as any).items).toHaveLength(2);
    const otherCategory = await client.callTool({ name: 'list_products', arguments: { category: 'garden' } });
    expect((otherCategory.structuredContent as any).items).toEqual([]);

    const { resources } = await client.listResources();
    expect(resources).toEqual([expect.objectContaining({ uri: `${app.baseUrl}${shop.base}/agent/catalog`, name: 'catalog', mimeType: 'application/json' })]);
    const read = await client.readResource({ uri: resources[0]!.uri });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toEqual(catalog.body);
  });

  it('GIVEN an agent WHEN it calls create_checkout and get_checkout THEN it gets the session, total and requirement the HTTP routes give, and the poll view', async () => {
    const agent = agentId();
    const created = await client.callTool({ name: 'create_checkout', arguments: { agent_id: agent, items: [{ sku: 'coffee', qty: 2 }, { sku: 'beans', qty: 1 }] } });
    expect(created.isError).toBeFalsy();
    const s = structured(created as any);
    expect(s).toMatchObject({ state: 'awaiting_payment', livemode: false, total: { currency: 'USD', total: '0.90' }, payment_required: { rail: 'x402', amountBaseUnits: '900000', payTo: TEST_PAY_TO } });
    const viaHttp = await poll(app, shop.base, s.session_id);
    const polled = await client.callTool({ name: 'get_checkout', arguments: { session_id: s.session_id } });
    expect(polled.structuredContent).toEqual(viaHttp.body);
    expect(viaHttp.body).toMatchObject({ id: s.session_id, agentId: agent, state: 'awaiting_payment' });
  });

  it('GIVEN a test merchant WHEN the official client buys with the x402 MCP flow THEN the PaymentRequired is the HTTP 402\'s, the paid call returns order, receipt and reference with _meta x402/payment-response, and one order and both events exist', async () => {
    const buyer = newBuyer();
    const http402 = await app.request('GET', `${shop.base}/x402/coffee?qty=2`);
    const { required, payment, result } = await callPaidTool(client, buyer, 'buy', { items: [{ sku: 'coffee', qty: 2 }] });

    // The same requirement as the HTTP 402 (exact scheme, network, amount, asset, payTo, EIP-712 domain, extensions); only the resource differs.
    const httpPr = httpPaymentRequiredOf(http402);
    expect(required.accepts).toEqual(httpPr.accepts);
    expect(required.accepts[0]).toEqual({ scheme: 'exact', network: 'eip155:84532', amount: '500000', asset: USDC_SEPOLIA, payTo: TEST_PAY_TO, maxTimeoutSeconds: 300, extra: { name: 'USDC', version: '2' } });
    expect(required.extensions).toEqual(httpPr.extensions);
    expect(required.resource).toEqual({ url: mcpUrl, description: '2 x Item coffee', mimeType: 'application/json' });
    expect(required).toMatchObject({ x402Version: 2, error: 'payment_required', reason_codes: ['PAYMENT_REQUIRED'] });

    expect(result.isError).toBeFalsy();
    const body = structured(result);
    expect(body).toMatchObject({ status: 'accepted', fulfillment: { rail: 'x402' } });
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(body);
    expect(result._meta?.['x402/payment-response']).toEqual({ success: true, transaction: body.fulfillment.reference, network: 'eip155:84532', payer: buyer.address });

    const { claims } = await verifyReceipt(app, shop.base, body.receipt);
    expect(claims).toMatchObject({ orderId: body.order_id, sessionId: body.session_id, merchantId: shop.merchant.id, total: { total: '0.50' } });
    expect(await ordersOf(app, body.session_id)).toEqual([expect.objectContaining({ id: body.order_id, decision: 'accept', settlement_ref: body.fulfillment.reference })]);
    expect(await eventTypes(app, body.session_id)).toEqual(['order.accepted', 'order.settled']);
    expect(payment.payload.authorization).toMatchObject({ from: buyer.address, value: '500000' });
  });

  it('GIVEN a cart of two SKUs WHEN buy is paid THEN one session for both lines at their total', async () => {
    const { required, result } = await callPaidTool(client, newBuyer(), 'buy', { items: [{ sku: 'coffee', qty: 1 }, { sku: 'beans', qty: 2 }] });
    expect(required.accepts[0]!.amount).toBe('1050000');
    const body = structured(result);
    expect(body.status).toBe('accepted');
    expect((await poll(app, shop.base, body.session_id)).body).toMatchObject({
      state: 'accepted',
      lines: [expect.objectContaining({ sku: 'coffee', qty: 1 }), expect.objectContaining({ sku: 'beans', qty: 2 })],
      total: { total: '1.05' },
    });
  });

  it('GIVEN an open session WHEN buy pays its session_id THEN the session settles, and the same payment through the HTTP settle route replays it', async () => {
    const buyer = newBuyer();
    const created = structured((await client.callTool({ name: 'create_checkout', arguments: { agent_id: agentId(), items: [{ sku: 'beans', qty: 1 }] } })) as any);
    const { required, payment, result } = await callPaidTool(client, buyer, 'buy', { session_id: created.session_id });
    expect(required).toMatchObject({ session_id: created.session_id, accepts: [expect.objectContaining({ amount: '400000' })] });
    const body = structured(result);
    expect(body).toMatchObject({ status: 'accepted', session_id: created.session_id });
    expect(result._meta?.['x402/payment-response']).toMatchObject({ success: true, transaction: body.fulfillment.reference });
    const polled = await client.callTool({ name: 'get_checkout', arguments: { session_id: created.session_id } });
    expect(polled.structuredContent).toMatchObject({ state: 'accepted', orderId: body.order_id, receipt: body.receipt });

    const viaHttp = await app.request('POST', `${shop.base}/agent/checkout/${created.session_id}/settle`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payment) } });
    expect(viaHttp.status, viaHttp.text).toBe(200);
    expect(viaHttp.body.order_id).toBe(body.order_id);
    expect(await ordersOf(app, created.session_id)).toHaveLength(1);
    expect(await eventTypes(app, created.session_id)).toEqual(['order.accepted', 'order.settled']);
  });
});

describe('idempotency: one authorization settles once, whichever transport repeats it', () => {
  it('GIVEN a settled MCP purchase WHEN the same PaymentPayload is sent again to buy and then to the HTTP paid resource THEN both replay the one order', async () => {
    const buyer = newBuyer();
    const { payment, result } = await callPaidTool(client, buyer, 'buy', { items: [{ sku: 'coffee', qty: 1 }] });
    const first = structured(result);
    expect(first.status).toBe('accepted');

    const again = await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }, payment);
    expect(again.isError).toBeFalsy();
    expect(again.structuredContent).toEqual(first);
    expect(again._meta?.['x402/payment-response']).toEqual(result._meta?.['x402/payment-response']);

    const viaHttp = await app.request('GET', `${shop.base}/x402/coffee`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payment) } });
    expect(viaHttp.status, viaHttp.text).toBe(200);
    expect(viaHttp.body).toEqual(first);
    expect(paymentResponseOf(viaHttp).transaction).toBe(first.fulfillment.reference);

    const sessions = (await x402Sessions(app, shop.merchant.id)).filter((s) => s.idempotency_key === `x402:${(payment.payload as { authorization: { nonce: string } }).authorization.nonce.toLowerCase()}`);
    expect(sessions).toHaveLength(1);
    expect((await ordersOfMerchant(app, shop.merchant.id)).filter((o) => o.session_id === first.session_id)).toHaveLength(1);
    expect(await eventTypes(app, first.session_id)).toEqual(['order.accepted', 'order.settled']);
  });

  it('GIVEN an authorization used over HTTP WHEN the same nonce comes to buy for another cart THEN NONCE_ALREADY_USED, nothing more settles', async () => {
    const buyer = newBuyer();
    const http402 = await app.request('GET', `${shop.base}/x402/coffee`);
    const payment = await signAccepts(buyer, httpPaymentRequiredOf(http402));
    const paid = await app.request('GET', `${shop.base}/x402/coffee`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payment) } });
    expect(paid.status, paid.text).toBe(200);

    // Same nonce, another cart (so another session): the authorization was spent.
    const reused = await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }, { sku: 'beans', qty: 1 }] }, payment);
    const pr = paymentRequiredOf(reused)!;
    expect(pr).toMatchObject({ reason_codes: expect.arrayContaining([expect.stringMatching(/NONCE_ALREADY_USED|PAYMENT_AMOUNT_MISMATCH/)]) });
    expect((await ordersOfMerchant(app, shop.merchant.id)).filter((o) => o.settlement_ref === paid.body.fulfillment.reference)).toHaveLength(1);
  });

  it('GIVEN the payment-identifier extension WHEN the same id comes with the same payment THEN it replays; with another payment THEN IDEMPOTENCY_KEY_REUSED', async () => {
    const buyer = newBuyer();
    const id = generatePaymentId();
    const first = await callWithPayment(client, 'buy', { items: [{ sku: 'beans', qty: 1 }] });
    const pr = paymentRequiredOf(first)!;
    const withId = (p: PaymentPayload) => ({ ...p, extensions: appendPaymentIdentifierToExtensions({ ...pr.extensions }, id) });
    const payment = withId(await signAccepts(buyer, pr));
    const paid = await callWithPayment(client, 'buy', { items: [{ sku: 'beans', qty: 1 }] }, payment);
    expect(structured(paid).status).toBe('accepted');
    const replay = await callWithPayment(client, 'buy', { items: [{ sku: 'beans', qty: 1 }] }, payment);
    expect(replay.structuredContent).toEqual(paid.structuredContent);

    const other = withId(await signAccepts(buyer, pr));
    const reused = await callWithPayment(client, 'buy', { items: [{ sku: 'beans', qty: 1 }] }, other);
    expect(errorOf(reused).reason_codes).toEqual(['IDEMPOTENCY_KEY_REUSED']);
    // The HTTP paid resource says the same for the same repeat.
    const viaHttp = await app.request('GET', `${shop.base}/x402/beans`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(other) } });
    expect(viaHttp.body.reason_codes).toEqual(['IDEMPOTENCY_KEY_REUSED']);
    expect((await x402Sessions(app, shop.merchant.id)).filter((s) => s.idempotency_key === `x402-pid:${id}`)).toHaveLength(1);
  });
});

describe('concurrency', () => {
  it('GIVEN one signed payment WHEN it is sent to buy twice at the same instant THEN one order, one settlement, and every answer names it or is a refusal', async () => {
    const pr = paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'beans', qty: 1 }] }))!;
    const payment = await signAccepts(newBuyer(), pr);
    const other = await mcpClient(mcpUrl);
    try {
      const answers = await Promise.all([
        callWithPayment(client, 'buy', { items: [{ sku: 'beans', qty: 1 }] }, payment),
        callWithPayment(other, 'buy', { items: [{ sku: 'beans', qty: 1 }] }, payment),
      ]);
      const accepted = answers.filter((a) => !a.isError).map((a) => structured(a));
      expect(accepted.length).toBeGreaterThanOrEqual(1);
      expect(new Set(accepted.map((a) => a.order_id)).size).toBe(1);
      for (const refused of answers.filter((a) => a.isError)) expect(paymentRequiredOf(refused) ?? errorOf(refused)).toBeTruthy();
      const sessionId = accepted[0]!.session_id as string;
      expect(await ordersOf(app, sessionId)).toHaveLength(1);
      expect(await eventTypes(app, sessionId)).toEqual(['order.accepted', 'order.settled']);
    } finally {
      await other.close();
    }
  });
});

describe('the gate answers over MCP as over HTTP', () => {
  it('GIVEN a merchant that requires a mandate over 0.10 USD WHEN buy is paid without one THEN the gate code comes back in a PaymentRequired, the code the HTTP paid resource answers', async () => {
    const strict = await publishedMerchant(app, { policy: { ...OPEN_POLICY, requireMandateOverUsd: 0.1 }, products: [{ sku: 'tea', amount: '0.30' }] });
    const strictClient = await mcpClient(`${app.baseUrl}${strict.base}/mcp`);
    try {
      const { required, result } = await callPaidTool(strictClient, newBuyer(), 'buy', { items: [{ sku: 'tea', qty: 1 }] });
      const refused = paymentRequiredOf(result)!;
      expect(refused.accepts).toEqual(required.accepts);
      const http402 = await app.request('GET', `${strict.base}/x402/tea`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(await signAccepts(newBuyer(), httpPaymentRequiredOf(await app.request('GET', `${strict.base}/x402/tea`)))) } });
      expect(http402.status).toBe(402);
      expect(refused.reason_codes).toEqual(http402.body.reason_codes);
      expect(refused.reason_codes).toContain('MANDATE_REQUIRED');
      // Each refusal is recorded as a rejected order (as over HTTP); nothing was accepted.
      const orders = await ordersOfMerchant(app, strict.merchant.id);
      expect(orders.map((o) => o.decision)).toEqual(['reject', 'reject']);
      expect(orders.map((o) => o.session_id)).toContain(refused.session_id);
    } finally {
      await strictClient.close();
    }
  });
});

describe('refused payments answer the HTTP codes', () => {
  /** The reason codes the HTTP paid resource answers for `payment` on coffee (qty 1). */
  const httpCodes = async (payment: PaymentPayload) => {
    const res = await app.request('GET', `${shop.base}/x402/coffee`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payment) } });
    expect(res.status, res.text).toBe(402);
    return res.body.reason_codes as string[];
  };

  it('GIVEN an authorization signed by another key than its `from` WHEN buy is called THEN SIGNER_MISMATCH in a PaymentRequired, like HTTP, and nothing is written', async () => {
    const pr = paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }))!;
    const victim = newBuyer();
    const forged = await signAccepts(newBuyer(), pr);
    forged.payload.authorization = { ...(forged.payload.authorization as object), from: victim.address };
    const before = (await x402Sessions(app, shop.merchant.id)).length;
    const res = await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }, forged);
    const refused = paymentRequiredOf(res)!;
    expect(refused).toMatchObject({ reason_codes: ['SIGNER_MISMATCH'], error: 'invalid_exact_evm_payload_signature', accepts: pr.accepts });
    expect(structured(res)).toEqual(JSON.parse((res.content[0] as { text: string }).text));
    expect(await httpCodes(forged)).toEqual(['SIGNER_MISMATCH']);
    expect((await x402Sessions(app, shop.merchant.id)).length).toBe(before);
  });

  it('GIVEN an expired authorization WHEN buy is called THEN PAYMENT_EXPIRED, like HTTP', async () => {
    const pr = paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }))!;
    const now = Math.floor(Date.now() / 1000);
    const expired = await payloadFromSigned(pr, await signPayment(newBuyer(), sessionPr(pr), { validAfter: now - 3600, validBefore: now - 60 }));
    const res = await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }, expired);
    expect(paymentRequiredOf(res)).toMatchObject({ reason_codes: ['PAYMENT_EXPIRED'], error: 'invalid_exact_evm_payload_authorization_valid_before' });
    expect(await httpCodes(expired)).toEqual(['PAYMENT_EXPIRED']);
  });

  it('GIVEN an authorization for less than the price WHEN buy is called THEN PAYMENT_AMOUNT_MISMATCH, like HTTP', async () => {
    const pr = paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }))!;
    const cheap = await payloadFromSigned(pr, await signPayment(newBuyer(), sessionPr(pr), { value: '1' }));
    const res = await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }, cheap);
    expect(paymentRequiredOf(res)!.reason_codes).toEqual(await httpCodes(cheap));
    expect(paymentRequiredOf(res)!.reason_codes).toEqual(['PAYMENT_AMOUNT_MISMATCH']);
  });
});

describe('held and pending purchases tell the agent what to poll', () => {
  it('GIVEN a merchant that holds new agents for review WHEN buy is paid THEN status hold with review_url, next and a get_checkout poll; get_checkout shows held', async () => {
    const held = await publishedMerchant(app, { policy: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null, minReputationTier: null }, products: [{ sku: 'tea', amount: '0.30' }] });
    const heldClient = await mcpClient(`${app.baseUrl}${held.base}/mcp`);
    try {
      const { result } = await callPaidTool(heldClient, newBuyer(), 'buy', { items: [{ sku: 'tea', qty: 1 }] });
      expect(result.isError).toBeFalsy();
      const body = structured(result);
      expect(body).toMatchObject({ status: 'hold', review_url: expect.any(String), next: expect.any(String), reason_codes: expect.any(Array) });
      expect(body.poll).toEqual({ tool: 'get_checkout', arguments: { session_id: body.session_id }, after_seconds: 60 });
      expect(result._meta?.['x402/payment-response']).toBeUndefined();
      const polled = await heldClient.callTool({ name: 'get_checkout', arguments: body.poll.arguments });
      expect(polled.structuredContent).toMatchObject({ state: 'held', id: body.session_id, reviewExpiresAt: expect.any(Number) });
    } finally {
      await heldClient.close();
    }
  });
});

describe('bad input never crashes a tool', () => {
  const cases: Array<[string, string, Record<string, unknown>, string]> = [
    ['get_merchant: an unknown field', 'get_merchant', { x: 1 }, 'VALIDATION_FAILED'],
    ['list_products: available as a string', 'list_products', { available: 'yes' }, 'VALIDATION_FAILED'],
    ['list_products: a category of 201 characters', 'list_products', { category: 'c'.repeat(201) }, 'VALIDATION_FAILED'],
    ['create_checkout: no agent_id', 'create_checkout', { items: [{ sku: 'coffee', qty: 1 }] }, 'VALIDATION_FAILED'],
    ['create_checkout: agent_id not a UUID', 'create_checkout', { agent_id: 'me', items: [{ sku: 'coffee', qty: 1 }] }, 'VALIDATION_FAILED'],
    ['create_checkout: qty a string', 'create_checkout', { agent_id: '6b62bd2f-dbab-4b32-8c73-99b7fd5ec07c', items: [{ sku: 'coffee', qty: '1' }] }, 'VALIDATION_FAILED'],
    ['create_checkout: a huge quantity', 'create_checkout', { agent_id: '6b62bd2f-dbab-4b32-8c73-99b7fd5ec07c', items: [{ sku: 'coffee', qty: 1e12 }] }, 'VALIDATION_FAILED'],
    ['create_checkout: an unknown SKU', 'create_checkout', { agent_id: '6b62bd2f-dbab-4b32-8c73-99b7fd5ec07c', items: [{ sku: 'nope', qty: 1 }] }, 'SKU_UNKNOWN'],
    ['create_checkout: a retired SKU', 'create_checkout', { agent_id: '6b62bd2f-dbab-4b32-8c73-99b7fd5ec07c', items: [{ sku: 'mug', qty: 1 }] }, 'SKU_UNAVAILABLE'],
    ['get_checkout: no session_id', 'get_checkout', {}, 'VALIDATION_FAILED'],
    ['get_checkout: an unknown session', 'get_checkout', { session_id: 'sess_01aaaaaaaaaaaaaaaaaaaaaaaa' }, 'SESSION_NOT_FOUND'],
    ['get_checkout: session_id a number', 'get_checkout', { session_id: 7 }, 'VALIDATION_FAILED'],
    ['buy: neither items nor session_id', 'buy', {}, 'VALIDATION_FAILED'],
    ['buy: both items and session_id', 'buy', { items: [{ sku: 'coffee', qty: 1 }], session_id: 'sess_x' }, 'VALIDATION_FAILED'],
    ['buy: an unknown SKU', 'buy', { items: [{ sku: 'nope', qty: 1 }] }, 'SKU_UNKNOWN'],
    ['buy: a huge quantity', 'buy', { items: [{ sku: 'coffee', qty: 1001 }] }, 'VALIDATION_FAILED'],
    ['buy: 101 lines', 'buy', { items: Array.from({ length: 101 }, (_, i) => ({ sku: `s${i}`, qty: 1 })) }, 'VALIDATION_FAILED'],
    ['buy: the same SKU twice', 'buy', { items: [{ sku: 'coffee', qty: 1 }, { sku: 'coffee', qty: 2 }] }, 'VALIDATION_FAILED'],
    ['buy: an unknown session', 'buy', { session_id: 'sess_01aaaaaaaaaaaaaaaaaaaaaaaa' }, 'SESSION_NOT_FOUND'],
    ['buy: items not an array', 'buy', { items: 'coffee' }, 'VALIDATION_FAILED'],
  ];
  it.each(cases)('GIVEN %s THEN a tool error with the reason code', async (_title, name, args, code) => {
    const res = await client.callTool({ name, arguments: args });
    const err = errorOf(res as any);
    expect(err.reason_codes).toEqual([code]);
    expect(err.error_human.length).toBeGreaterThan(5);
    expect(res.structuredContent).toBeUndefined();
  });

  const notPayloads: Array<[string, unknown]> = [
    ['a string', 'pay me'],
    ['a number', 42],
    ['an empty object', {}],
    ['a v2 payload without a signature', { x402Version: 2, accepted: { scheme: 'exact', network: 'eip155:84532' }, payload: { authorization: {} } }],
    ['an unknown version', { x402Version: 3 }],
    ['null', null],
  ];
  it.each(notPayloads)('GIVEN _meta["x402/payment"] that is %s THEN PAYMENT_MALFORMED in a PaymentRequired, nothing written', async (_title, payment) => {
    const before = (await x402Sessions(app, shop.merchant.id)).length;
    const res = await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }, payment);
    expect(paymentRequiredOf(res)).toMatchObject({ reason_codes: ['PAYMENT_MALFORMED'], error: 'invalid_payload', accepts: [expect.objectContaining({ amount: '250000' })] });
    expect((await x402Sessions(app, shop.merchant.id)).length).toBe(before);
  });

  it('GIVEN a payment for another network WHEN buy is called THEN PAYMENT_NETWORK_MISMATCH; a mock payment THEN PAYMENT_MALFORMED', async () => {
    const pr = paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }))!;
    const other = await signAccepts(newBuyer(), { ...pr, accepts: [{ ...pr.accepts[0]!, network: 'eip155:8453' }] });
    expect(paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }, other))!.reason_codes).toEqual(['PAYMENT_NETWORK_MISMATCH']);
    expect(paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }, { mock: true }))!.reason_codes).toEqual(['PAYMENT_MALFORMED']);
  });

  it('GIVEN an unknown tool THEN a JSON-RPC error naming NOT_FOUND; GIVEN an unknown resource THEN the same', async () => {
    await expect(client.callTool({ name: 'steal', arguments: {} })).rejects.toMatchObject({ code: -32602, data: { reason_codes: ['NOT_FOUND'] } });
    await expect(client.readResource({ uri: 'file:///etc/passwd' })).rejects.toMatchObject({ code: -32602, data: { reason_codes: ['NOT_FOUND'] } });
  });
});

describe('the HTTP edge of the endpoint', () => {
  const call = (id: number, name: string, args: unknown) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

  it('GIVEN no session WHEN a raw client POSTs tools/call without initialize THEN it is answered (stateless) as JSON, with no session id', async () => {
    const res = await rawMcp(mcpUrl, call(1, 'list_products', {}));
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(res.json.result.structuredContent.items).toHaveLength(2);
  });

  it('GIVEN the discovery host WHEN a client POSTs /mcp at its root THEN the merchant answers with root-relative URLs', async () => {
    const host = `${shop.merchant.slug}.${DISCOVERY}`;
    const headers = { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
    const merchant = await hostRequest(app, 'POST', '/mcp', host, { body: call(1, 'get_merchant', {}), headers });
    expect(merchant.status, merchant.text).toBe(200);
    expect(merchant.body.result.structuredContent).toMatchObject({ merchant: { id: shop.merchant.id }, mcp_url: '/mcp', catalog_url: '/agent/catalog' });
    const unpaid = await hostRequest(app, 'POST', '/mcp', host, { body: call(2, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }), headers });
    expect(unpaid.body.result.structuredContent.resource.url).toMatch(new RegExp(`^http://${host.replace(/\./g, '\\.')}(:\\d+)?/mcp$`));
  });

  it('GIVEN the endpoint WHEN it is asked anything but one JSON-RPC POST THEN a 4xx with a reason code, never a 500', async () => {
    const get = await fetch(mcpUrl, { headers: { accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
    expect(((await get.json()) as any).error.data.reason_codes).toEqual(['METHOD_NOT_ALLOWED']);
    expect((await fetch(mcpUrl, { method: 'DELETE' })).status).toBe(405);

    const batch = await rawMcp(mcpUrl, [call(1, 'get_merchant', {}), call(2, 'get_merchant', {})]);
    expect(batch.status).toBe(400);
    expect(batch.json.error.data.reason_codes).toEqual(['VALIDATION_FAILED']);

    const unknownMerchant = await rawMcp(`${app.baseUrl}/m/no-such-shop/mcp`, call(1, 'get_merchant', {}));
    expect(unknownMerchant.status).toBe(404);
    expect(unknownMerchant.json.reason_codes).toEqual(['NOT_FOUND']);

    const notJson = await rawMcp(mcpUrl, '{"jsonrpc":');
    expect(notJson.status).toBe(400);
    expect(notJson.json.reason_codes).toEqual(['BAD_REQUEST']);

    // What storage cannot hold (NUL, lone surrogates) is refused before MCP, in arguments and in _meta alike.
    const nul = await rawMcp(mcpUrl, call(1, 'list_products', { category: 'a\u0000b' }));
    expect(nul.status).toBe(400);
    expect(nul.json.reason_codes).toEqual(['VALIDATION_FAILED']);
    const nulPayment = { ...call(2, 'buy', { items: [{ sku: 'coffee', qty: 1 }] }), params: { name: 'buy', arguments: { items: [{ sku: 'coffee', qty: 1 }] }, _meta: { 'x402/payment': { x402Version: 2, accepted: { scheme: 'exact\u0000' } } } } };
    const nulMeta = await rawMcp(mcpUrl, nulPayment);
    expect(nulMeta.status).toBe(400);
    expect(nulMeta.json.error_human).toMatch(/x402\/payment\.accepted\.scheme: contains a NUL/);

    const huge = await rawMcp(mcpUrl, call(1, 'list_products', { category: 'x'.repeat(300 * 1024) }));
    expect(huge.status).toBe(413);
    expect(huge.json.reason_codes).toEqual(['PAYLOAD_TOO_LARGE']);

    const notRpc = await rawMcp(mcpUrl, { hello: 'world' });
    expect(notRpc.status).toBeGreaterThanOrEqual(400);
    expect(notRpc.status).toBeLessThan(500);
  });

  it('GIVEN a browser WHEN it preflights the MCP endpoint THEN CORS allows the MCP headers, as for the manifest', async () => {
    const pre = await fetch(mcpUrl, { method: 'OPTIONS', headers: { origin: 'https://agent.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, mcp-protocol-version' } });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-headers')).toMatch(/Mcp-Protocol-Version/);
    expect(pre.headers.get('access-control-allow-methods')).toMatch(/POST/);
    const res = await rawMcp(mcpUrl, call(1, 'get_merchant', {}), { origin: 'https://agent.example' });
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('GIVEN a flood of create_checkout calls from one agent THEN the per-agent rate limit answers RATE_LIMITED as a tool error, as over HTTP', async () => {
    const agent = agentId();
    let limited: { reason_codes: string[]; retry_after_seconds?: unknown } | null = null;
    // Twice the limit and one: a minute boundary crossed mid-loop resets the count once.
    for (let i = 0; i <= 2 * RATE && !limited; i++) {
      const res = await client.callTool({ name: 'create_checkout', arguments: { agent_id: agent, items: [{ sku: 'coffee', qty: 1 }] } });
      if (res.isError) limited = errorOf(res as any);
    }
    expect(limited?.reason_codes).toEqual(['RATE_LIMITED']);
    expect(limited?.retry_after_seconds).toEqual(expect.any(Number));
    expect(limited!.retry_after_seconds as number).toBeGreaterThanOrEqual(1);
  });
});
