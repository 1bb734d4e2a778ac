/**
 * Merchant quickstart: create a merchant, add products, set and publish a policy, register
 * a webhook endpoint.
 *
 *   SVC_BASE_URL=http://localhost:3000 SVC_API_KEY=svc_test_... npx tsx examples/merchant-quickstart.ts
 *
 * Env: SVC_BASE_URL, SVC_API_KEY (required); SVC_MERCHANT_SLUG (default coffee-<random>),
 * SVC_PAY_TO (your USDC receiving address), SVC_WEBHOOK_URL (test mode default
 * http://127.0.0.1:4242/webhooks, where examples/webhook-receiver.ts listens; live mode: none
 * unless set, as live endpoints must be public https URLs).
 * The last line printed is a JSON summary for scripts.
 */
import { randomBytes } from 'node:crypto';
import { MerchantClient, POLICY_PRESETS, SvcApiError } from '@svc/sdk/merchant';

function env(name: string, fallback?: string): string {
  const value = process.env[name] ?? fallback;
  if (!value) throw new Error(`set ${name}`);
  return value;
}

async function main() {
  const svc = new MerchantClient({ apiKey: env('SVC_API_KEY'), baseUrl: env('SVC_BASE_URL') });
  console.log(`mode: ${svc.livemode ? 'live' : 'test'}`);

  // 1. The merchant, with where settled USDC lands (base-sepolia in test mode) and the mock rail for tests.
  const slug = env('SVC_MERCHANT_SLUG', `coffee-${randomBytes(4).toString('hex')}`);
  const merchant = await svc.merchants.create({
    slug,
    name: 'Example Coffee',
    domain: `${slug}.example.com`,
    receiving: {
      x402: { chain: svc.livemode ? 'base' : 'base-sepolia', address: env('SVC_PAY_TO', '0x1111111111111111111111111111111111111111') },
      ...(svc.livemode ? {} : { mock: { account: 'acct_example' } }),
    },
  });
  console.log(`merchant ${merchant.id} (${merchant.slug}), receipt key ${merchant.receipt_kid}`);
  const scope = { merchant_id: merchant.id };

  // 2. Products: prices are exact decimal strings.
  for (const p of [
    { sku: 'espresso', name: 'Espresso', price: { amount: '2.80', currency: 'USD' }, category: 'drinks' },
    { sku: 'beans-1kg', name: 'House beans, 1 kg', price: { amount: '18.00', currency: 'USD' }, category: 'beans', unit: 'each' },
  ]) {
    const item = await svc.catalog.create(p, scope);
    console.log(`product ${item.sku} at ${item.price.amount} ${item.price.currency}`);
  }

  // 3. A policy version from a preset, validated, then published (the manifest goes live).
  const version = await svc.policy.put({ body: { ...POLICY_PRESETS.BALANCED }, note: 'quickstart' }, scope);
  const check = await svc.policy.validate(scope);
  if (!check.ok) throw new Error(`draft is not publishable: ${check.findings.map((f) => f.code).join(', ')}`);
  const published = await svc.policy.publish(scope);
  console.log(`policy v${version.version} published (active version ${published.active_policy_version})`);

  // 4. Where order events go; keep the secret: the receiver verifies signatures with it. Live
  // endpoints must be public https URLs, so in live mode only when SVC_WEBHOOK_URL names one.
  const webhookUrl = svc.livemode ? process.env.SVC_WEBHOOK_URL : env('SVC_WEBHOOK_URL', 'http://127.0.0.1:4242/webhooks');
  const endpoint = webhookUrl
    ? await svc.webhooks.endpoints.create({ url: webhookUrl, enabled_events: ['order.settled', 'order.rejected', 'order.held'], description: 'quickstart receiver' })
    : null;
  if (endpoint) console.log(`webhook endpoint ${endpoint.id} -> ${endpoint.url} (${endpoint.status})`);

  const agentUrl = `${svc.baseUrl}/m/${merchant.id}`;
  console.log(`agents discover the shop at ${agentUrl}/.well-known/agentic-checkout.json`);
  console.log(
    JSON.stringify({
      merchant_id: merchant.id,
      slug: merchant.slug,
      agent_url: agentUrl,
      webhook_endpoint_id: endpoint?.id ?? null,
      webhook_secret: endpoint?.secret ?? null,
    }),
  );
}

main().catch((err: unknown) => {
  if (err instanceof SvcApiError) console.error(`${err.name} ${err.status} ${err.reasonCodes.join(',')}: ${err.errorHuman} (request ${err.requestId})`);
  else console.error(err);
  process.exit(1);
});
