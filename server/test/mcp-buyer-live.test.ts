import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { eventTypes, ordersOf } from './helpers/agent-protocol.js';
import { publishedLiveEspresso } from './helpers/agent.js';
import { buildPackages, ROOT } from './helpers/build.js';
import type { TestApp } from './helpers/harness.js';
import { startLiveApp } from './helpers/live.js';
import { launchSvcMcp } from './helpers/mcp.js';

/**
 * svc-mcp in live mode: the built bin over stdio, driven by the official MCP client, buys from
 * a live merchant on base (anvil, chain id 8453, the EIP-3009 token at the real USDC address,
 * the onchain facilitator broadcasting). USDC moves on chain by exactly the price.
 */
const BIN = join(ROOT, 'mcp/dist/bin.js');
const KEY = generatePrivateKey();
const buyer = privateKeyToAccount(KEY);
const work = mkdtempSync(join(tmpdir(), 'svc-mcp-live-'));
const transcript: string[] = [];

let chain: Anvil;
let app: TestApp;
let payTo: Address;
let shopUrl: string;

const launch = (env: Record<string, string>) =>
  launchSvcMcp(BIN, { HOME: work, SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_SPENDING_FILE: join(work, 'spending.json'), ...env }, transcript);

beforeAll(async () => {
  const relayers = [generatePrivateKey(), generatePrivateKey()];
  [chain] = await Promise.all([startAnvil(), buildPackages(['mcp'])]);
  app = await startLiveApp(chain, relayers);
  const live = await publishedLiveEspresso(app, await app.key('live'));
  payTo = live.payTo;
  const shop = live.shop;
  shopUrl = `${app.baseUrl}/m/${shop.merchant.slug}`;
  await chain.mintUsdc(buyer.address, 10_000_000n);
}, 300_000);

afterAll(async () => {
  await app?.stop();
  await chain?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('svc-mcp pays a live merchant on chain', () => {
  it('GIVEN a wallet that allows base WHEN the agent buys a 0.75 espresso THEN USDC moves by exactly 0.75, the reference is the mined transfer, one order and both events once; 2 espressos are over the 1.00 per-payment limit and move nothing', async () => {
    const mcp = await launch({ SVC_MCP_ALLOWED_CHAINS: 'base', SVC_MCP_MAX_PER_PAYMENT: '1.00', SVC_MCP_MAX_PER_DAY: '2.00' });
    const found = await mcp.call('discover_merchant', { url: shopUrl });
    expect(found.structuredContent).toMatchObject({ livemode: true, chain: 'base', can_buy: true });
    const before = { buyer: await chain.usdcBalance(buyer.address), merchant: await chain.usdcBalance(payTo) };

    const r = await mcp.call('buy', { merchant: shopUrl, items: [{ sku: 'espresso', qty: 1 }] });
    expect(r.isError, JSON.stringify(r)).toBeFalsy();
    const b = r.structuredContent;
    expect(b).toMatchObject({ status: 'accepted', amount: '0.75', chain: 'base', receipt_verified: true, receipt_claims: { livemode: true, chain: 'base', orderId: b.order_id } });
    const tx = await chain.client.getTransactionReceipt({ hash: b.reference as Hex });
    expect(tx.status).toBe('success');
    expect(tx.to?.toLowerCase()).toBe(USDC_BASE.toLowerCase());
    expect(await chain.usdcBalance(buyer.address)).toBe(before.buyer - 750_000n);
    expect(await chain.usdcBalance(payTo)).toBe(before.merchant + 750_000n);
    expect(await ordersOf(app, b.session_id)).toMatchObject([{ id: b.order_id, decision: 'accept', settlement_ref: b.reference }]);
    expect(await eventTypes(app, b.session_id)).toEqual(['order.accepted', 'order.settled']);

    const over = await mcp.call('buy', { merchant: shopUrl, items: [{ sku: 'espresso', qty: 2 }] });
    expect(over.isError).toBe(true);
    expect(over.structuredContent).toMatchObject({ reason_codes: ['LIMIT_PER_PAYMENT_EXCEEDED'], amount: '1.50', over_by: '0.50' });
    expect(await chain.usdcBalance(buyer.address)).toBe(before.buyer - 750_000n);
    expect((await mcp.call('spending', {})).structuredContent).toMatchObject({ spent_today: '0.75', remaining_today: '1.25' });
    await mcp.close();
  });

  it('GIVEN the default configuration (test chains only) WHEN the agent buys from the live merchant THEN CHAIN_NOT_ALLOWED and nothing moves; the key never appears in anything printed or answered', async () => {
    const mcp = await launch({});
    const before = await chain.usdcBalance(buyer.address);
    const r = await mcp.call('buy', { merchant: shopUrl, items: [{ sku: 'espresso', qty: 1 }] });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toMatchObject({ reason_codes: ['CHAIN_NOT_ALLOWED'], chain: 'base', allowed_chains: ['base-sepolia'] });
    expect(await chain.usdcBalance(buyer.address)).toBe(before);
    await mcp.close();
    const all = transcript.join('\n').toLowerCase();
    expect(all).toContain(buyer.address.toLowerCase());
    expect(all).not.toContain(KEY.slice(2).toLowerCase());
  });
});
