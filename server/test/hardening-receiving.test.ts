import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorShape, merchantBody, TestApp, type TestKey } from './helpers/harness.js';

const LIVE_PAY_TO = '0x2222222222222222222222222222222222222222';
let app: TestApp;
let live: TestKey;
beforeAll(async () => {
  app = await TestApp.start();
  live = await app.key('live');
});
afterAll(async () => {
  await app?.stop();
});

function expectCodes(res: { status: number; body: unknown; text: string }, codes: string[]) {
  expect(res.status, res.text).toBe(400);
  expectErrorShape(res.body);
  expect([...res.body.reason_codes].sort()).toEqual([...codes].sort());
  expect(res.body.error_human).not.toContain('\n');
  return res.body.error_human;
}

describe('receiving errors list every failing rule', () => {
  it('GIVEN a live merchant with a test chain and a mock rail WHEN created THEN 400 names RECEIVING_CHAIN_UNSUPPORTED and RECEIVING_MOCK_IN_LIVE in one line', async () => {
    const body = merchantBody({ receiving: { x402: { chain: 'base-sepolia', address: LIVE_PAY_TO }, mock: { account: 'acct_x' } } });
    const human = expectCodes(await app.request('POST', '/v1/merchants', { key: live, body }), ['RECEIVING_CHAIN_UNSUPPORTED', 'RECEIVING_MOCK_IN_LIVE']);
    expect(human).toMatch(/receiving\.x402\.chain/);
    expect(human).toMatch(/receiving\.mock/);
  });

  it('GIVEN several broken rules (chain, asset, unknown rail, rails list) WHEN a live merchant is created or patched THEN every code is reported', async () => {
    const receiving = { x402: { chain: 'ethereum', address: '0x1234' }, paypal: {} };
    const created = await app.request('POST', '/v1/merchants', { key: live, body: merchantBody({ receiving, rails: ['x402', 'mock'] }) });
    expectCodes(created, ['RECEIVING_CHAIN_UNSUPPORTED', 'RECEIVING_ADDRESS_INVALID', 'RECEIVING_RAIL_UNKNOWN', 'RECEIVING_MOCK_IN_LIVE']);

    const ok = await app.request('POST', '/v1/merchants', { key: live, body: merchantBody({ receiving: { x402: { chain: 'base', address: LIVE_PAY_TO } } }) });
    expect(ok.status, ok.text).toBe(201);
    const patched = await app.request('PATCH', `/v1/merchants/${ok.body.id}`, {
      key: live,
      body: { receiving: { x402: { chain: 'base-sepolia', address: LIVE_PAY_TO }, mock: { account: 'a' } } },
    });
    expectCodes(patched, ['RECEIVING_CHAIN_UNSUPPORTED', 'RECEIVING_MOCK_IN_LIVE']);
    const put = await app.request('PUT', `/v1/receiving?merchant_id=${ok.body.id}`, {
      key: live,
      body: { receiving: { x402: { chain: 'base-sepolia', address: LIVE_PAY_TO, asset: 'DAI' }, mock: { account: 'a' } } },
    });
    expectCodes(put, ['RECEIVING_CHAIN_UNSUPPORTED', 'RECEIVING_ASSET_UNKNOWN', 'RECEIVING_MOCK_IN_LIVE']);
  });
});
