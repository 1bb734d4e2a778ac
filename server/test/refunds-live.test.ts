import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Refund } from '@svc/contract';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { publishedMerchant, signPayment, signRefund } from './helpers/agent.js';
import { expectError, sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { startLiveApp } from './helpers/live.js';
import { startSettlementWorker } from '../src/modules/settlement/reconciler.js';
import { startX402Facilitator, X402_FACILITATOR_TOKEN, type Knobs } from './helpers/x402-facilitator.js';

/**
 * Live refunds on a real EVM (anvil, chain id 8453, an EIP-3009 token at the USDC address)
 * through the `onchain` facilitator (a relayer carries the transfer) and through a stock remote
 * x402 facilitator: the merchant's receiving key signs, nothing about the chain is mocked.
 */
let chain: Anvil;
let app: TestApp;
let key: TestKey;
let wallet: PrivateKeyAccount;
let base: string;
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];

beforeAll(async () => {
  chain = await startAnvil();
  app = await startLiveApp(chain, relayerKeys);
  key = await app.key('live');
  wallet = privateKeyToAccount(generatePrivateKey());
  const shop = await publishedMerchant(app, {
    key,
    merchant: { receiving: { x402: { chain: 'base', address: wallet.address } } },
    products: [{ sku: 'beans', amount: '12.00' }],
    policy: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null },
  });
  base = shop.base;
}, 120_000);
afterAll(async () => {
  await app?.stop();
  await chain?.stop();
});

/** A funded buyer pays 12.00 over x402 on chain; returns the order and the buyer. */
async function paidOrder(at = { app: () => app, base: () => base }): Promise<{ orderId: string; buyer: PrivateKeyAccount }> {
  const buyer = privateKeyToAccount(generatePrivateKey());
  await chain.mintUsdc(buyer.address, 100_000_000n);
  const s = await at.app().request('POST', `${at.base()}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'beans', qty: 1 }] } });
  expect(s.status, s.text).toBe(201);
  const payment = await signPayment(buyer, s.body.payment_required);
  const res = await at.app().request('POST', `${at.base()}/agent/checkout/${s.body.session_id}/settle`, { body: payment });
  expect(res.status, res.text).toBe(200);
  return { orderId: res.body.order_id, buyer };
}


const create = (body: Record<string, unknown>) => app.request<Refund>('POST', '/v1/refunds', { key, body });
const authorize = (id: string, signature: string) => app.request<Refund>('POST', `/v1/refunds/${id}/authorize`, { key, body: { signature } });
const eventsOf = async (refundId: string) =>
  (await sql<{ type: string }>(app, "select type from events where payload->'data'->'object'->>'id' = ? order by seq", [refundId])).map((r) => r.type);
/** Mined transfers of the refund's authorization: the token's AuthorizationUsed logs naming its signer and nonce. */
async function transfersOf(r: Refund): Promise<number> {
  const logs = await chain.client.getLogs({
    address: USDC_BASE,
    event: { type: 'event', name: 'AuthorizationUsed', inputs: [{ type: 'address', name: 'authorizer', indexed: true }, { type: 'bytes32', name: 'nonce', indexed: true }] },
    args: { authorizer: r.authorization_request?.typed_data.message.from as Address | undefined },
    fromBlock: 0n,
  });
  return logs.filter((l) => (l.args as { nonce?: string }).nonce?.toLowerCase() === r.authorization_request?.typed_data.message.nonce.toLowerCase()).length;
}

describe('live refunds on a real chain (onchain facilitator)', () => {
  it('GIVEN a live order paid on chain WHEN the merchant refunds part of it THEN the buyer gains and the merchant loses exactly the refund, one transfer, one succeeded refund and event', async () => {
    const { orderId, buyer } = await paidOrder();
    const before = { buyer: await chain.usdcBalance(buyer.address), merchant: await chain.usdcBalance(wallet.address) };
    const r = (await create({ order_id: orderId, amount: '5.25' })).body;
    expect(r).toMatchObject({ status: 'requires_authorization', chain: 'base', livemode: true, amount_base_units: '5250000' });
    expect(r.authorization_request!.typed_data.domain).toMatchObject({ name: 'USD Coin', chainId: 8453 });
    const done = await authorize(r.id, await signRefund(wallet, r));
    expect(done.status, done.text).toBe(200);
    expect(done.body.status).toBe('succeeded');
    const receipt = await chain.client.getTransactionReceipt({ hash: done.body.transaction as Hex });
    expect(receipt.status).toBe('success');
    expect(await chain.usdcBalance(buyer.address)).toBe(before.buyer + 5_250_000n);
    expect(await chain.usdcBalance(wallet.address)).toBe(before.merchant - 5_250_000n);
    expect(await transfersOf(r)).toBe(1);
    expect(await eventsOf(r.id)).toEqual(['refund.created', 'refund.succeeded']);
  });

  it('GIVEN a merchant wallet without the funds WHEN authorized THEN 402 INSUFFICIENT_FUNDS from the simulation, nothing sent, and once funded the same refund succeeds', async () => {
    const { orderId, buyer } = await paidOrder();
    const r = (await create({ order_id: orderId })).body;
    // The merchant moves its USDC away (its own authorization, carried by a third party).
    const balance = await chain.usdcBalance(wallet.address);
    const sink = privateKeyToAccount(generatePrivateKey()).address;
    const drain = await signPayment(wallet, { payTo: sink, amountBaseUnits: balance.toString(), chainId: 8453, verifyingContract: USDC_BASE, eip712Domain: { name: 'USD Coin', version: '2' } });
    const drained = await chain.sendAuthorization({ chain: 'base', payTo: sink, amountBaseUnits: balance.toString(), authorization: drain.payment.authorization, signature: drain.payment.signature as Hex });
    // Read the balance only once the drain is mined: on a busy machine the read can come first.
    expect((await chain.client.waitForTransactionReceipt({ hash: drained })).status).toBe('success');
    expect(await chain.usdcBalance(wallet.address)).toBe(0n);

    const sig = await signRefund(wallet, r);
    expectError(await authorize(r.id, sig), 402, 'INSUFFICIENT_FUNDS');
    expect((await app.request<Refund>('GET', `/v1/refunds/${r.id}`, { key })).body.status).toBe('requires_authorization');
    expect(await transfersOf(r)).toBe(0);

    await chain.mintUsdc(wallet.address, 12_000_000n);
    const before = await chain.usdcBalance(buyer.address);
    const done = await authorize(r.id, sig);
    expect(done.body.status, done.text).toBe('succeeded');
    expect(await chain.usdcBalance(buyer.address)).toBe(before + 12_000_000n);
    expect(await chain.usdcBalance(wallet.address)).toBe(0n);
    expect(await transfersOf(r)).toBe(1);
  });

  it('GIVEN the merchant carried the signed refund on chain himself WHEN authorized THEN it succeeds with that transaction and nothing more is sent; GIVEN the authorization canceled on chain THEN 402 NONCE_ALREADY_USED and the refund is canceled, its amount free', async () => {
    const { orderId, buyer } = await paidOrder();
    const carried = (await create({ order_id: orderId, amount: '2.00' })).body;
    const sig = await signRefund(wallet, carried);
    const m = carried.authorization_request!.typed_data.message;
    const before = await chain.usdcBalance(buyer.address);
    const hash = await chain.sendAuthorization({
      chain: 'base',
      payTo: m.to,
      amountBaseUnits: m.value,
      authorization: { from: m.from, to: m.to, value: m.value, validAfter: m.validAfter, validBefore: m.validBefore, nonce: m.nonce },
      signature: sig,
    });
    expect((await chain.client.waitForTransactionReceipt({ hash })).status).toBe('success');
    const done = await authorize(carried.id, sig);
    expect(done.status, done.text).toBe(200);
    expect(done.body).toMatchObject({ status: 'succeeded', transaction: hash });
    expect(await chain.usdcBalance(buyer.address)).toBe(before + 2_000_000n);
    expect(await transfersOf(carried)).toBe(1);

    const canceled = (await create({ order_id: orderId, amount: '3.00' })).body;
    const cancelHash = await chain.cancelAuthorization(wallet, canceled.authorization_request!.typed_data.message.nonce as Hex);
    await chain.client.waitForTransactionReceipt({ hash: cancelHash });
    expectError(await authorize(canceled.id, await signRefund(wallet, canceled)), 402, 'NONCE_ALREADY_USED');
    expect((await app.request<Refund>('GET', `/v1/refunds/${canceled.id}`, { key })).body).toMatchObject({ status: 'canceled', failure: { reason_codes: ['NONCE_ALREADY_USED'] } });
    expect(await chain.usdcBalance(buyer.address)).toBe(before + 2_000_000n);
    expect((await create({ order_id: orderId })).body.amount).toBe('10.00');
    expect(await eventsOf(canceled.id)).toEqual(['refund.created']);
  });

  it('GIVEN a transfer still in the pool when the wait ends WHEN authorized THEN 202 pending, and the settlement worker finishes it from the chain once', async () => {
    const { orderId, buyer } = await paidOrder();
    const r = (await create({ order_id: orderId, amount: '1.00' })).body;
    const before = await chain.usdcBalance(buyer.address);
    await chain.setAutomine(false);
    const realWait = app.services.config.SVC_SETTLE_WAIT_MS;
    (app.services.config as { SVC_SETTLE_WAIT_MS: number }).SVC_SETTLE_WAIT_MS = 1_000;
    const worker = startSettlementWorker(app.services, { intervalMs: 200 });
    try {
      const pending = await authorize(r.id, await signRefund(wallet, r));
      expect(pending.status, pending.text).toBe(202);
      expect(pending.body.status).toBe('pending');
      await chain.mine(1);
      const deadline = Date.now() + 60_000;
      let got = await app.request<Refund>('GET', `/v1/refunds/${r.id}`, { key });
      while (got.body.status === 'pending' && Date.now() < deadline) {
        await new Promise((res) => setTimeout(res, 200));
        await chain.mine(1);
        got = await app.request<Refund>('GET', `/v1/refunds/${r.id}`, { key });
      }
      expect(got.body.status).toBe('succeeded');
    } finally {
      await worker.stop();
      (app.services.config as { SVC_SETTLE_WAIT_MS: number }).SVC_SETTLE_WAIT_MS = realWait;
      await chain.setAutomine(true);
    }
    expect(await chain.usdcBalance(buyer.address)).toBe(before + 1_000_000n);
    expect(await transfersOf(r)).toBe(1);
    expect(await eventsOf(r.id)).toEqual(['refund.created', 'refund.succeeded']);
  });
});

describe('live refunds through a remote x402 facilitator', () => {
  let remote: { url: string; server: Server };
  let remoteApp: TestApp;
  let remoteKey: TestKey;
  let remoteBase = '';
  const knobs: Knobs = { settleDelayMs: 0, seenAuth: [], calls: [] };

  beforeAll(async () => {
    remote = await startX402Facilitator(chain, knobs);
    remoteApp = await TestApp.start({
      SVC_LIVE_FACILITATOR: 'remote',
      SVC_FACILITATOR_URL: remote.url,
      SVC_FACILITATOR_AUTH_HEADER: `Authorization: Bearer ${X402_FACILITATOR_TOKEN}`,
      SVC_RPC_URL_BASE: chain.rpcUrl,
    });
    remoteKey = await remoteApp.key('live');
    const shop = await publishedMerchant(remoteApp, {
      key: remoteKey,
      merchant: { receiving: { x402: { chain: 'base', address: wallet.address } } },
      products: [{ sku: 'beans', amount: '12.00' }],
      policy: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null },
    });
    remoteBase = shop.base;
  }, 120_000);
  afterAll(async () => {
    await remoteApp?.stop();
    remote?.server.close();
  });

  it('GIVEN a live order paid through the remote facilitator WHEN refunded in full THEN the facilitator carries the transfer back: balances move by exactly the refund, one transfer', async () => {
    const { orderId, buyer } = await paidOrder({ app: () => remoteApp, base: () => remoteBase });
    const before = { buyer: await chain.usdcBalance(buyer.address), merchant: await chain.usdcBalance(wallet.address) };
    const r = (await remoteApp.request<Refund>('POST', '/v1/refunds', { key: remoteKey, body: { order_id: orderId } })).body;
    expect(r.amount_base_units).toBe('12000000');
    const done = await remoteApp.request<Refund>('POST', `/v1/refunds/${r.id}/authorize`, { key: remoteKey, body: { signature: await signRefund(wallet, r) } });
    expect(done.status, done.text).toBe(200);
    expect(done.body.status).toBe('succeeded');
    expect((await chain.client.getTransactionReceipt({ hash: done.body.transaction as Hex })).status).toBe('success');
    expect(await chain.usdcBalance(buyer.address)).toBe(before.buyer + 12_000_000n);
    expect(await chain.usdcBalance(wallet.address)).toBe(before.merchant - 12_000_000n);
    expect(await transfersOf(r)).toBe(1);
    const orders = await remoteApp.request('GET', '/v1/orders', { key: remoteKey });
    expect(orders.body.data.find((o: { id: string }) => o.id === orderId)).toMatchObject({ amount_refunded: '12.00', refund_status: 'full' });
  });
});
