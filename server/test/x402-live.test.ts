import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wrapFetchWithPaymentFromConfig, decodePaymentResponseHeader } from '@x402/fetch';
import { ExactEvmScheme } from '@x402/evm';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { eventTypes, ordersOf, poll } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { paymentRequiredOf, recordingFetch } from './helpers/x402.js';
import { startLiveApp } from './helpers/live.js';
import { publishedLiveEspresso } from './helpers/agent.js';

/**
 * Live mode on a real EVM (anvil, chain id 8453, the EIP-3009 token at the real USDC address,
 * the onchain facilitator broadcasting from relayers) bought by an unmodified @x402/fetch
 * client. Nothing about the chain is mocked.
 */
let chain: Anvil;
let app: TestApp;
let key: TestKey;
let payTo: Address;
let base: string;
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];

beforeAll(async () => {
  chain = await startAnvil();
  app = await startLiveApp(chain, relayerKeys);
  key = await app.key('live');
  const live = await publishedLiveEspresso(app, key);
  payTo = live.payTo;
  const shop = live.shop;
  base = shop.base;
}, 120_000);
afterAll(async () => {
  await app?.stop();
  await chain?.stop();
});

describe('an unmodified @x402/fetch client buys on a real chain', () => {
  it('GIVEN a live merchant on base (anvil) WHEN the stock client GETs the paid resource THEN USDC moves on chain by exactly the price, PAYMENT-RESPONSE names the mined transaction, the order and both events exist once, and a replayed PAYMENT-SIGNATURE pays nothing more', async () => {
    const buyer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(buyer.address, 10_000_000n);
    const before = { buyer: await chain.usdcBalance(buyer.address), merchant: await chain.usdcBalance(payTo) };

    const unpaid = await fetch(`${app.baseUrl}${base}/x402/espresso`);
    expect(unpaid.status).toBe(402);
    expect(paymentRequiredOf(unpaid).accepts[0]).toMatchObject({ network: 'eip155:8453', asset: USDC_BASE, amount: '750000', extra: { name: 'USD Coin', version: '2' } });

    const rec = recordingFetch();
    const fetchWithPayment = wrapFetchWithPaymentFromConfig(rec.fetch, { schemes: [{ network: 'eip155:8453', client: new ExactEvmScheme(buyer) }] });
    const res = await fetchWithPayment(`${app.baseUrl}${base}/x402/espresso`);
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);

    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toEqual({ success: true, transaction: body.fulfillment.reference, network: 'eip155:8453', payer: buyer.address });
    const receipt = await chain.client.getTransactionReceipt({ hash: settled.transaction as Hex });
    expect(receipt.status).toBe('success');
    expect(receipt.to?.toLowerCase()).toBe(USDC_BASE.toLowerCase());
    expect(await chain.usdcBalance(buyer.address)).toBe(before.buyer - 750_000n);
    expect(await chain.usdcBalance(payTo)).toBe(before.merchant + 750_000n);

    expect(await ordersOf(app, body.session_id)).toMatchObject([{ decision: 'accept', settlement_ref: settled.transaction }]);
    expect(await eventTypes(app, body.session_id)).toEqual(['order.accepted', 'order.settled']);
    expect((await poll(app, base, body.session_id)).body).toMatchObject({ state: 'accepted', livemode: true, settlement: { reference: settled.transaction } });

    // Replaying the signature the client sent: the same answer, no second transfer or transaction.
    const signature = rec.log[1]!.requestHeaders['payment-signature']!;
    const replay = await fetch(`${app.baseUrl}${base}/x402/espresso`, { headers: { 'PAYMENT-SIGNATURE': signature } });
    expect(replay.status).toBe(200);
    expect(await replay.json()).toEqual(body);
    expect(decodePaymentResponseHeader(replay.headers.get('payment-response')!).transaction).toBe(settled.transaction);
    expect(await chain.usdcBalance(payTo)).toBe(before.merchant + 750_000n);
    const txs = await sql(app, 'select count(*)::int as n from settlement_transactions t join settlement_attempts a on a.id = t.attempt_id where a.session_id = ?', [body.session_id]);
    expect(Number(txs[0]!.n)).toBe(1);
    expect(await ordersOf(app, body.session_id)).toHaveLength(1);
  });

  it('GIVEN a payer without USDC WHEN the stock client pays THEN 402 in x402 shape with INSUFFICIENT_FUNDS and nothing moves', async () => {
    const poor = privateKeyToAccount(generatePrivateKey());
    const merchantBefore = await chain.usdcBalance(payTo);
    const fetchWithPayment = wrapFetchWithPaymentFromConfig(fetch, { schemes: [{ network: 'eip155:8453', client: new ExactEvmScheme(poor) }] });
    const res = await fetchWithPayment(`${app.baseUrl}${base}/x402/espresso`);
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(402);
    expect(body).toMatchObject({ status: 'payment_invalid', reason_codes: ['INSUFFICIENT_FUNDS'], error: 'insufficient_funds' });
    expect(paymentRequiredOf(res).error).toBe('insufficient_funds');
    expect(await chain.usdcBalance(payTo)).toBe(merchantBefore);
    expect(await ordersOf(app, body.session_id)).toHaveLength(0);
  });
});
