import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AgentClient, type MerchantClient } from '../src/index.js';
import { TestApp } from '../../server/test/helpers/harness.js';
import { merchantClient, newMerchant, setupShop } from './helpers.js';

let app: TestApp;
let svc: MerchantClient;

beforeAll(async () => {
  app = await TestApp.start();
  svc = merchantClient(app, await app.key('test'));
});
afterAll(async () => app?.stop());

describe('auto-pagination', () => {
  it('GIVEN five merchants WHEN iterating with pages of two THEN every merchant comes once, newest first, over three pages', async () => {
    const created: string[] = [];
    for (let i = 0; i < 5; i++) created.push((await svc.merchants.create(newMerchant())).id);

    const seen: string[] = [];
    for await (const m of svc.merchants.list({ limit: 2 })) seen.push(m.id);
    expect(seen).toEqual([...created].reverse());

    const pages: Array<{ n: number; has_more: boolean }> = [];
    for await (const page of svc.merchants.list({ limit: 2 }).pages()) pages.push({ n: page.data.length, has_more: page.has_more });
    expect(pages).toEqual([
      { n: 2, has_more: true },
      { n: 2, has_more: true },
      { n: 1, has_more: false },
    ]);

    const first = await svc.merchants.list({ limit: 2 }).page();
    expect(first.data.map((m) => m.id)).toEqual(seen.slice(0, 2));
    const rest: string[] = [];
    for await (const m of svc.merchants.list({ limit: 2, cursor: first.next_cursor! })) rest.push(m.id);
    expect(rest).toEqual(seen.slice(2));

    expect((await svc.merchants.list({ limit: 2 }).toArray({ max: 3 })).map((m) => m.id)).toEqual(seen.slice(0, 3));
  });

  it('GIVEN three purchases WHEN iterating orders with pages of two THEN all three orders come back', async () => {
    const merchant = await setupShop(svc);
    const shop = await new AgentClient({ account: privateKeyToAccount(generatePrivateKey()), agentId: randomUUID() }).discover(`${app.baseUrl}/m/${merchant.id}`);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const outcome = await shop.buy([{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
      if (outcome.status !== 'accepted') throw new Error(JSON.stringify(outcome));
      ids.push(outcome.order_id);
    }
    const seen: string[] = [];
    for await (const order of svc.orders.list({ merchant_id: merchant.id, limit: 2 })) seen.push(order.id);
    expect(seen).toEqual([...ids].reverse());

    const events: string[] = [];
    for await (const e of svc.webhooks.events.list({ type: 'order.settled', limit: 2 })) events.push(String(e.data.object.id));
    expect(events).toEqual([...ids].reverse());
  });

  it('GIVEN three webhook endpoints WHEN iterating with pages of two THEN all three come back', async () => {
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await svc.webhooks.endpoints.create({ url: `http://127.0.0.1:9/h${i}`, enabled_events: ['*'] })).id);
    const seen: string[] = [];
    for await (const ep of svc.webhooks.endpoints.list({ limit: 2 })) seen.push(ep.id);
    expect(seen).toEqual([...made].reverse());
  });
});
