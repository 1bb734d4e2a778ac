// A consumer project's program, compiled by the packages test with plain tsc (nodenext and
// bundler resolution, strict + exactOptionalPropertyTypes) against the packed tarballs, and
// run with plain node. It configures a merchant with the merchant SDK, receives and verifies
// the order.settled webhook, and buys with the agent SDK. Prints one JSON line.
// The project is what `npm init -y` makes (CommonJS), so this ES module is a .mts file; it reads
// its settings with the project's own zod, the registry's current one (4), beside the SDK's.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MerchantClient, SvcValidationError } from '@svc/sdk/merchant';
import { AgentClient, verifyReceipt } from '@svc/sdk/agent';
import { verifyWebhook } from '@svc/sdk/webhooks';
import * as everything from '@svc/sdk';
import { contract, reasonCodes, type ReasonCode } from '@svc/contract';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { z } from 'zod';

// z.url() is zod 4's: this line does not compile against zod 3.
const settings = z.object({ SVC_BASE_URL: z.url(), SVC_API_KEY: z.string().min(1) }).parse(process.env);
const baseUrl = settings.SVC_BASE_URL;
const apiKey = settings.SVC_API_KEY;

// The README's own lines, as a consumer on exactOptionalPropertyTypes writes them.
const svc = new MerchantClient({ apiKey, baseUrl, maxRetries: Number(process.env.SVC_RETRIES ?? 2) });
const agent = new AgentClient({ account: privateKeyToAccount(generatePrivateKey()), agentId: process.env.AGENT_ID });

// Types are real, not `any`: each line below must be a compile error.
// @ts-expect-error a price is an object with amount and currency
void (() => svc.catalog.create({ sku: 'x', name: 'X', price: 4.5 }));
// @ts-expect-error not a reason code
const notACode: ReasonCode = 'NOT_A_REASON_CODE';
void notACode;

// A webhook receiver verifying deliveries with @svc/sdk/webhooks on the raw body.
let webhookSecret = '';
const settled: { ok: boolean; type: string; order: string }[] = [];
let gotSettled: () => void = () => undefined;
const settledArrived = new Promise<void>((resolve) => (gotSettled = resolve));
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    const check = verifyWebhook(raw, req.headers['svc-signature'] as string | undefined, webhookSecret);
    const event = JSON.parse(raw.toString('utf8')) as { type: string; data: { object: { id?: string; order_id?: string } } };
    if (event.type === 'order.settled') {
      settled.push({ ok: check.ok, type: event.type, order: event.data.object.id ?? event.data.object.order_id ?? '' });
      gotSettled();
    }
    res.statusCode = check.ok ? 200 : 400;
    res.end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

const slug = `consumer-${Math.random().toString(16).slice(2, 10)}`;
const merchant = await svc.merchants.create({
  slug,
  name: 'Consumer Shop',
  domain: `${slug}.example.com`,
  receiving: { x402: { chain: 'base-sepolia', address: '0x52908400098527886e0f7030069857d2e4169ee7' }, mock: { account: 'acct_consumer' } },
});
const scope = { merchant_id: merchant.id };
await svc.catalog.create({ sku: 'espresso', name: 'Espresso', price: { amount: '2.80', currency: 'USD' } }, scope);
await svc.policy.put({ body: { requireMandateOverUsd: 100, holdForReviewBelowTier: null } }, scope);
await svc.policy.publish(scope);
const hook = await svc.webhooks.endpoints.create({ url: hookUrl, enabled_events: ['order.settled'] });
webhookSecret = hook.secret;

let typedError = '';
try {
  await svc.catalog.create({ sku: 'bad', name: 'Bad', price: { amount: '4.999999999', currency: 'USD' } }, scope);
} catch (err) {
  if (err instanceof SvcValidationError) typedError = err.reasonCodes.join(',');
}

const shop = await agent.discover(`${baseUrl}/m/${merchant.id}/`);
const items = await shop.catalog();
const outcome = await shop.buy([{ sku: 'espresso', qty: 2 }]);
if (outcome.status !== 'accepted') throw new Error(`purchase not accepted: ${JSON.stringify(outcome)}`);
const claims = await shop.verifyReceipt(outcome.receipt);
const offline = await verifyReceipt(outcome.receipt, { jwksUrl: `${baseUrl}/v1/merchants/${merchant.id}/jwks` });

// The deadline's timer is unref'd, so it does not keep the process alive once the webhook came.
await Promise.race([settledArrived, new Promise((_, fail) => setTimeout(() => fail(new Error('no order.settled webhook within 90 s')), 90_000).unref())]);
receiver.close();

console.log(
  JSON.stringify({
    node: process.version,
    merchant: merchant.id,
    skus: items.map((i) => i.sku),
    status: outcome.status,
    order: outcome.order_id,
    receiptOrder: claims.orderId,
    offlineOrder: offline.orderId,
    webhook: settled[0],
    typedError,
    reasonCodes: reasonCodes.length,
    routes: Object.keys(contract).length,
    exports: ['MerchantClient', 'AgentClient', 'verifyWebhook', 'verifyReceipt'].filter((n) => n in everything),
  }),
);
