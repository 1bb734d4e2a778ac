import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload } from '@x402/core/types';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { eventTypes, ordersOf, poll, verifyReceipt } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { publishedLiveEspresso, signPayment } from './helpers/agent.js';
import type { TestApp } from './helpers/harness.js';
import { startLiveApp } from './helpers/live.js';
import { callPaidTool, callWithPayment, mcpClient, paymentRequiredOf, signAccepts, structured } from './helpers/mcp.js';

/**
 * Live mode on a real EVM (anvil, chain id 8453, the EIP-3009 token at the real USDC address,
 * the onchain facilitator broadcasting from relayers) bought through the merchant's MCP
 * endpoint by the x402 MCP client of helpers/mcp.ts (official MCP client, x402's MCP transport).
 */
let chain: Anvil;
let app: TestApp;
let payTo: Address;
let base: string;
let client: Client;
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
const PRICE = 750_000n;

beforeAll(async () => {
  chain = await startAnvil();
  app = await startLiveApp(chain, relayerKeys);
  const key = await app.key('live');
  const live = await publishedLiveEspresso(app, key);
  payTo = live.payTo;
  const shop = live.shop;
  base = shop.base;
  client = await mcpClient(`${app.baseUrl}${base}/mcp`);
}, 120_000);
afterAll(async () => {
  await client?.close();
  await app?.stop();
  await chain?.stop();
});

const transfersOf = async (sessionId: string) =>
  Number((await sql(app, 'select count(*)::int as n from settlement_transactions t join settlement_attempts a on a.id = t.attempt_id where a.session_id = ?', [sessionId]))[0]!.n);

describe('the x402 MCP client buys from a live merchant on a real chain', () => {
  it('GIVEN a funded buyer WHEN it calls buy, signs the PaymentRequired and calls again THEN USDC moves by exactly the price, the result names the mined transaction, one order, one receipt and both events; the same payment again (MCP, then HTTP) moves nothing more', async () => {
    const buyer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(buyer.address, 10_000_000n);
    const before = { buyer: await chain.usdcBalance(buyer.address), merchant: await chain.usdcBalance(payTo) };

    const { required, payment, result } = await callPaidTool(client, buyer, 'buy', { items: [{ sku: 'espresso', qty: 1 }] });
    expect(required.accepts[0]).toMatchObject({ scheme: 'exact', network: 'eip155:8453', asset: USDC_BASE, amount: '750000', payTo, extra: { name: 'USD Coin', version: '2' } });
    expect(result.isError, JSON.stringify(result)).toBeFalsy();
    const body = structured(result);
    expect(body).toMatchObject({ status: 'accepted', fulfillment: { rail: 'x402' } });
    const settled = result._meta?.['x402/payment-response'] as { transaction: Hex };
    expect(settled).toEqual({ success: true, transaction: body.fulfillment.reference, network: 'eip155:8453', payer: buyer.address });

    const receipt = await chain.client.getTransactionReceipt({ hash: settled.transaction });
    expect(receipt.status).toBe('success');
    expect(receipt.to?.toLowerCase()).toBe(USDC_BASE.toLowerCase());
    expect(await chain.usdcBalance(buyer.address)).toBe(before.buyer - PRICE);
    expect(await chain.usdcBalance(payTo)).toBe(before.merchant + PRICE);

    expect(await ordersOf(app, body.session_id)).toEqual([expect.objectContaining({ id: body.order_id, decision: 'accept', settlement_ref: settled.transaction })]);
    const { claims } = await verifyReceipt(app, base, body.receipt);
    expect(claims).toMatchObject({ orderId: body.order_id, livemode: true, settlementRef: settled.transaction });
    expect(await eventTypes(app, body.session_id)).toEqual(['order.accepted', 'order.settled']);
    expect((await poll(app, base, body.session_id)).body).toMatchObject({ state: 'accepted', livemode: true, settlement: { reference: settled.transaction } });

    // The same authorization again: over MCP, then over HTTP. The one answer, no second transfer.
    const again = await callWithPayment(client, 'buy', { items: [{ sku: 'espresso', qty: 1 }] }, payment);
    expect(again.structuredContent).toEqual(body);
    const viaHttp = await fetch(`${app.baseUrl}${base}/x402/espresso`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payment) } });
    expect(viaHttp.status).toBe(200);
    expect(await viaHttp.json()).toEqual(body);
    expect(await chain.usdcBalance(payTo)).toBe(before.merchant + PRICE);
    expect(await chain.usdcBalance(buyer.address)).toBe(before.buyer - PRICE);
    expect(await transfersOf(body.session_id)).toBe(1);
    expect(await ordersOf(app, body.session_id)).toHaveLength(1);
    expect(await eventTypes(app, body.session_id)).toEqual(['order.accepted', 'order.settled']);
  });

  it('GIVEN a buyer without USDC WHEN it pays over MCP THEN INSUFFICIENT_FUNDS in a PaymentRequired, as the HTTP route answers, and nothing moves', async () => {
    const poor = privateKeyToAccount(generatePrivateKey());
    const merchantBefore = await chain.usdcBalance(payTo);
    const { payment, result } = await callPaidTool(client, poor, 'buy', { items: [{ sku: 'espresso', qty: 1 }] });
    const refused = paymentRequiredOf(result)!;
    expect(refused).toMatchObject({ reason_codes: ['INSUFFICIENT_FUNDS'], error: 'insufficient_funds', session_id: expect.any(String) });
    expect(result._meta?.['x402/payment-response']).toBeUndefined();
    expect(await chain.usdcBalance(payTo)).toBe(merchantBefore);
    expect(await ordersOf(app, refused.session_id as string)).toHaveLength(0);

    // A fresh authorization from the same poor buyer over HTTP: the same code.
    const fresh = await signAccepts(poor, refused);
    const viaHttp = await fetch(`${app.baseUrl}${base}/x402/espresso`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(fresh) } });
    expect(viaHttp.status).toBe(402);
    expect(((await viaHttp.json()) as { reason_codes: string[] }).reason_codes).toEqual(['INSUFFICIENT_FUNDS']);
    expect(payment.payload.authorization).toMatchObject({ from: poor.address });
    expect(await chain.usdcBalance(payTo)).toBe(merchantBefore);
  });

  it('GIVEN an expired authorization from a funded buyer WHEN it pays over MCP THEN PAYMENT_EXPIRED, as the HTTP route answers, and nothing moves', async () => {
    const funded = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(funded.address, 10_000_000n);
    const merchantBefore = await chain.usdcBalance(payTo);
    const pr = paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'espresso', qty: 1 }] }))!;
    const now = Math.floor(Date.now() / 1000);
    const a = pr.accepts[0]!;
    const signed = await signPayment(funded, { payTo: a.payTo, amountBaseUnits: a.amount, chainId: 8453, verifyingContract: a.asset, eip712Domain: a.extra as { name: string; version: string } }, { validAfter: now - 3600, validBefore: now - 60 });
    const auth = signed.payment.authorization;
    const expired: PaymentPayload = {
      x402Version: 2,
      resource: pr.resource,
      accepted: a,
      payload: { signature: signed.payment.signature, authorization: { ...auth, validAfter: String(auth.validAfter), validBefore: String(auth.validBefore) } },
    };
    const res = await callWithPayment(client, 'buy', { items: [{ sku: 'espresso', qty: 1 }] }, expired);
    expect(paymentRequiredOf(res)).toMatchObject({ reason_codes: ['PAYMENT_EXPIRED'], error: 'invalid_exact_evm_payload_authorization_valid_before' });
    const viaHttp = await fetch(`${app.baseUrl}${base}/x402/espresso`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(expired) } });
    expect(viaHttp.status).toBe(402);
    expect(((await viaHttp.json()) as { reason_codes: string[] }).reason_codes).toEqual(['PAYMENT_EXPIRED']);
    expect(await chain.usdcBalance(payTo)).toBe(merchantBefore);
    expect(await chain.usdcBalance(funded.address)).toBe(10_000_000n);
  });

  it('GIVEN a forged signer WHEN it pays a live merchant over MCP THEN SIGNER_MISMATCH and nothing reaches the chain', async () => {
    const funded = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(funded.address, 10_000_000n);
    const merchantBefore = await chain.usdcBalance(payTo);
    const pr = paymentRequiredOf(await callWithPayment(client, 'buy', { items: [{ sku: 'espresso', qty: 1 }] }))!;
    const forged = await signAccepts(privateKeyToAccount(generatePrivateKey()), pr);
    forged.payload.authorization = { ...(forged.payload.authorization as object), from: funded.address };
    const res = await callWithPayment(client, 'buy', { items: [{ sku: 'espresso', qty: 1 }] }, forged);
    expect(paymentRequiredOf(res)!.reason_codes).toEqual(['SIGNER_MISMATCH']);
    expect(await chain.usdcBalance(payTo)).toBe(merchantBefore);
    expect(await chain.usdcBalance(funded.address)).toBe(10_000_000n);
  });
});
