import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from 'viem/accounts';
import { publishedLiveEspresso, publishedMerchant } from './helpers/agent.js';
import { startAnvil, type Anvil } from './helpers/anvil.js';
import type { TestApp, TestKey } from './helpers/harness.js';
import { startLiveApp } from './helpers/live.js';

/**
 * GET /v1/receiving/balance (issue 29, the overview's live balance): balanceOf of the merchant's
 * receiving address on a real local chain (anvil with the EIP-3009 test token at the Base USDC
 * address), through the live facilitator's node. Test mode has no on-chain balance (409); a
 * stranger's key cannot read another project's merchant (404).
 */
let chain: Anvil;
let app: TestApp;
let key: TestKey;

beforeAll(async () => {
  chain = await startAnvil();
  app = await startLiveApp(chain, [generatePrivateKey()]);
  key = await app.key('live');
}, 120_000);
afterAll(async () => {
  await app?.stop();
  await chain?.stop();
});

describe('GET /v1/receiving/balance', () => {
  it('GIVEN a live merchant whose receiving address holds 12.345678 USDC WHEN the balance is read THEN the exact decimal string and base units', async () => {
    const { shop, payTo } = await publishedLiveEspresso(app, key);
    const empty = await app.request('GET', `/v1/receiving/balance?merchant_id=${shop.merchant.id}`, { key });
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body).toMatchObject({ chain: 'base', address: payTo, asset: 'USDC', balance: '0.00', base_units: '0' });

    await chain.mintUsdc(payTo, 12_345_678n);
    const res = await app.request('GET', `/v1/receiving/balance?merchant_id=${shop.merchant.id}`, { key });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ chain: 'base', address: payTo, asset: 'USDC', balance: '12.345678', base_units: '12345678' });
    expect(res.body.read_at).toMatch(/^\d{4}-\d{2}-\d{2}T/);

    const stranger = await app.key('live');
    const foreign = await app.request('GET', `/v1/receiving/balance?merchant_id=${shop.merchant.id}`, { key: stranger });
    expect(foreign.status).toBe(404);
  });

  it('GIVEN a test-mode merchant WHEN its balance is read THEN 409 RECEIVING_BALANCE_UNAVAILABLE saying why', async () => {
    const shop = await publishedMerchant(app, {});
    const res = await app.request('GET', `/v1/receiving/balance?merchant_id=${shop.merchant.id}`, { key: shop.key });
    expect(res.status).toBe(409);
    expect(res.body.reason_codes).toEqual(['RECEIVING_BALANCE_UNAVAILABLE']);
    expect(res.body.error_human).toMatch(/test mode/i);
  });
});
