import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { verifyReceipt } from '@svc/sdk/agent';
import { agentIdFor } from '@svc/mcp';
import { TestApp } from './helpers/harness.js';
import { launchSvcMcp, type BuyerResult, type SvcMcp } from './helpers/mcp.js';
import { publishedMerchant } from './helpers/agent.js';
import { ordersOf } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { buildPackages, ROOT } from './helpers/build.js';
import { runCommand } from './helpers/spawn.js';
import { payerAgentId } from '../src/modules/x402/agent-id.js';

/**
 * The buyer's MCP server (`@svc/mcp`, bin `svc-mcp`) as an agent host runs it: the built bin
 * (mcp/dist/bin.js, what `npx svc-mcp` runs) spawned over stdio and driven by the official MCP
 * client, against a real server with test merchants. Three launches share one spending file:
 * limits hold across a restart. Everything the children print and every tool result is kept,
 * and none of it may hold the wallet key.
 */

const BIN = join(ROOT, 'mcp/dist/bin.js');
const KEY = generatePrivateKey();
const KEY_HEX = KEY.slice(2);
const wallet = privateKeyToAccount(KEY);
const work = mkdtempSync(join(tmpdir(), 'svc-mcp-buyer-'));
const SPENDING_FILE = join(work, 'state', 'spending.json');

type Result = BuyerResult;
type Buyer = SvcMcp;

/** Everything that left the children: stderr, tool lists and tool results. */
const transcript: string[] = [];

let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
let heldShop: Awaited<ReturnType<typeof publishedMerchant>>;
let otherShop: Awaited<ReturnType<typeof publishedMerchant>>;
const url = (ref: string) => `${app.baseUrl}/m/${ref}`;

const launch = (env: Record<string, string>): Promise<Buyer> =>
  launchSvcMcp(BIN, { HOME: work, SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_SPENDING_FILE: SPENDING_FILE, SVC_MCP_SERVICE_URL: app.baseUrl, ...env }, transcript);

const LIMITS = { SVC_MCP_MAX_PER_PAYMENT: '10.00', SVC_MCP_MAX_PER_DAY: '10.00', SVC_MCP_ALLOWED_CHAINS: 'base-sepolia' };
let allowList = '';

beforeAll(async () => {
  [app] = await Promise.all([TestApp.start(), buildPackages(['mcp'])]);
  const noHolds = { requireMandateOverUsd: null, holdForReviewBelowTier: null };
  shop = await publishedMerchant(app, {
    policy: noHolds,
    products: [
      { sku: 'coffee', amount: '4.50' },
      { sku: 'beans', amount: '12.00' },
      { sku: 'tea', amount: '3.00' },
    ],
  });
  heldShop = await publishedMerchant(app, { policy: { requireMandateOverUsd: null, holdForReviewBelowTier: 'premium' }, products: [{ sku: 'sticker', amount: '0.50' }] });
  otherShop = await publishedMerchant(app, { policy: noHolds });
  // the first by slug (through /m/<slug>), the second by id
  allowList = `${shop.merchant.slug},${heldShop.merchant.id}`;
}, 300_000);

afterAll(async () => {
  await app?.stop();
  rmSync(work, { recursive: true, force: true });
});

const body = (r: Result) => r.structuredContent as Record<string, any>;
const text = (r: Result) => r.content.map((c) => c.text ?? '').join('\n');
const attemptsOf = async (sessionId: string) => sql(app, 'select id from settlement_attempts where session_id = ?', [sessionId]);
const sessionsOf = async (merchantId: string) => sql(app, 'select id from checkout_sessions where merchant_id = ?', [merchantId]);

describe('svc-mcp over stdio', () => {
  let buyer: Buyer;
  let firstOrder: { order_id: string; receipt: string; session_id: string };

  it('GIVEN the bin launched by an MCP client THEN it lists the six tools, each described for a model with an input schema, and discovers and lists a merchant', async () => {
    buyer = await launch({ ...LIMITS, SVC_MCP_ALLOWED_MERCHANTS: allowList });
    const { tools } = await buyer.client.listTools();
    transcript.push(JSON.stringify(tools));
    expect(tools.map((t) => t.name).sort()).toEqual(['buy', 'discover_merchant', 'get_order_status', 'list_products', 'spending', 'verify_receipt']);
    for (const t of tools) {
      expect(t.description!.length, t.name).toBeGreaterThan(60);
      expect(t.inputSchema.type).toBe('object');
    }
    expect(tools.find((t) => t.name === 'buy')!.inputSchema.required).toEqual(['merchant', 'items']);

    const found = await buyer.call('discover_merchant', { url: url(shop.merchant.slug) });
    expect(found.isError).toBeFalsy();
    expect(body(found)).toMatchObject({ merchant_id: shop.merchant.id, livemode: false, chain: 'base-sepolia', allowed_merchant: true, allowed_chain: true, can_buy: true });
    const other = await buyer.call('discover_merchant', { url: url(otherShop.merchant.id) });
    expect(body(other)).toMatchObject({ merchant_id: otherShop.merchant.id, allowed_merchant: false, can_buy: false });

    const listed = await buyer.call('list_products', { merchant: url(shop.merchant.slug) });
    expect(body(listed).products.map((p: any) => [p.sku, p.price.amount]).sort()).toEqual([['beans', '12.00'], ['coffee', '4.50'], ['tea', '3.00']]);
    expect(buyer.stderr()).toContain(`wallet ${wallet.address}`);
  });

  it('GIVEN an allowed merchant id WHEN another host serves a manifest claiming that id (a proxy of the real one) THEN the wallet refuses it before any checkout: ids and slugs count only on the service host', async () => {
    const impostor = createServer((req, res) => {
      const target = new URL(req.url ?? '/', app.baseUrl);
      fetch(target, { method: req.method, headers: { accept: req.headers.accept ?? '*/*' } })
        .then(async (r) => {
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
          res.end(Buffer.from(await r.arrayBuffer()));
        })
        .catch(() => res.writeHead(502).end());
    });
    await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve));
    try {
      const fake = (ref: string) => `http://127.0.0.1:${(impostor.address() as AddressInfo).port}/m/${ref}`;
      const found = await buyer.call('discover_merchant', { url: fake(heldShop.merchant.id) });
      expect(body(found)).toMatchObject({ merchant_id: heldShop.merchant.id, allowed_merchant: false, can_buy: false });
      const before = (await sessionsOf(heldShop.merchant.id)).length;
      const refused = await buyer.call('buy', { merchant: fake(heldShop.merchant.id), items: [{ sku: 'sticker', qty: 1 }] });
      expect(refused.isError).toBe(true);
      expect(body(refused)).toMatchObject({ reason_codes: ['MERCHANT_NOT_ALLOWED'] });
      expect(await sessionsOf(heldShop.merchant.id)).toHaveLength(before);
    } finally {
      await new Promise((resolve) => impostor.close(resolve));
    }
  });

  it('GIVEN limits of 10.00 per payment and per day WHEN the agent buys a 4.50 coffee THEN one order, a receipt that verifies against the merchant key, and 5.50 left today', async () => {
    const r = await buyer.call('buy', { merchant: url(shop.merchant.slug), items: [{ sku: 'coffee', qty: 1 }] });
    expect(r.isError, text(r)).toBeFalsy();
    const b = body(r);
    expect(b).toMatchObject({ status: 'accepted', amount: '4.50', currency: 'USDC', chain: 'base-sepolia', merchant_id: shop.merchant.id, receipt_verified: true });
    expect(b.order_id).toMatch(/^ord_/);
    expect(b.reference).toMatch(/^0x[0-9a-f]{64}$/);
    firstOrder = b as typeof firstOrder;

    expect(await ordersOf(app, b.session_id)).toMatchObject([{ id: b.order_id, decision: 'accept', settlement_ref: b.reference }]);
    const jwks = await app.request('GET', `/m/${shop.merchant.id}/.well-known/jwks.json`);
    const claims = await verifyReceipt(b.receipt, { jwks: jwks.body, expected: { merchantId: shop.merchant.id, orderId: b.order_id } });
    expect(claims).toMatchObject({ sessionId: b.session_id, agentId: agentIdFor(wallet.address) });
    // the agent id the service gives this wallet as a plain x402 payer: one wallet, one reputation
    expect(agentIdFor(wallet.address)).toBe(payerAgentId(wallet.address));

    const verified = await buyer.call('verify_receipt', { merchant: url(shop.merchant.slug), receipt: b.receipt });
    expect(body(verified)).toMatchObject({ valid: true, claims: { orderId: b.order_id } });
    const forged = await buyer.call('verify_receipt', { merchant: url(shop.merchant.slug), receipt: b.receipt.slice(0, -4) + (b.receipt.endsWith('AAAA') ? 'BBBB' : 'AAAA') });
    expect(forged.isError).toBe(true);
    expect(body(forged).reason_codes).toEqual(['RECEIPT_SIGNATURE_INVALID']);

    const status = await buyer.call('get_order_status', { merchant: url(shop.merchant.slug), session_id: b.session_id });
    expect(body(status)).toMatchObject({ status: 'accepted', order_id: b.order_id, receipt: b.receipt, reference: b.reference });

    const spending = await buyer.call('spending');
    expect(body(spending)).toMatchObject({ spent_today: '4.50', pending_today: '0.00', remaining_today: '5.50', max_per_day: '10.00', max_per_payment: '10.00', wallet_address: wallet.address });
  });

  it('GIVEN a 12.00 cart WHEN the agent buys THEN it is refused: over the per-payment limit of 10.00 by 2.00, and nothing is signed or settled', async () => {
    const r = await buyer.call('buy', { merchant: url(shop.merchant.slug), items: [{ sku: 'beans', qty: 1 }] });
    expect(r.isError).toBe(true);
    expect(body(r)).toMatchObject({ reason_codes: ['LIMIT_PER_PAYMENT_EXCEEDED'], amount: '12.00', limit: '10.00', over_by: '2.00' });
    expect(body(r).error_human).toContain('over the per-payment limit of 10.00 USDC by 2.00 USDC');
    expect(await attemptsOf(body(r).session_id)).toEqual([]);
    expect((await app.request('GET', `/m/${shop.merchant.id}/agent/checkout/${body(r).session_id}`)).body.state).toBe('awaiting_payment');
    expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '4.50', remaining_today: '5.50' });
  });

  it('GIVEN 4.50 spent of 10.00 today WHEN the agent buys 6.00 of tea THEN it is refused: over the daily limit by 0.50, and nothing is signed', async () => {
    const r = await buyer.call('buy', { merchant: url(shop.merchant.slug), items: [{ sku: 'tea', qty: 2 }] });
    expect(r.isError).toBe(true);
    expect(body(r)).toMatchObject({ reason_codes: ['LIMIT_PER_DAY_EXCEEDED'], amount: '6.00', limit: '10.00', over_by: '0.50', remaining_today: '5.50' });
    expect(body(r).error_human).toContain('over today\'s limit');
    expect(body(r).error_human).toContain('by 0.50 USDC');
    expect(await attemptsOf(body(r).session_id)).toEqual([]);
  });

  it('GIVEN a merchant not in the allowed list WHEN the agent buys THEN MERCHANT_NOT_ALLOWED before any checkout', async () => {
    const r = await buyer.call('buy', { merchant: url(otherShop.merchant.id), items: [{ sku: 'coffee', qty: 1 }] });
    expect(r.isError).toBe(true);
    expect(body(r).reason_codes).toEqual(['MERCHANT_NOT_ALLOWED']);
    expect(await sessionsOf(otherShop.merchant.id)).toEqual([]);
  });

  it('GIVEN a host between the agent and the service that turns a test-mode requirement into a mainnet one WHEN the agent buys THEN PAYMENT_REQUIREMENT_INVALID and nothing is signed', async () => {
    // forwards everything to the service; rewrites the checkout's payment requirement to base mainnet's chain id and token
    const proxy: Server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const upstream = await fetch(app.baseUrl + req.url, { method: req.method, headers: { 'content-type': 'application/json' }, body: chunks.length ? Buffer.concat(chunks) : undefined });
      let text = await upstream.text();
      if (req.method === 'POST' && req.url!.endsWith('/agent/checkout') && upstream.status === 201) {
        const created = JSON.parse(text);
        created.payment_required = { ...created.payment_required, chainId: 8453, verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' };
        sessionSeen = created.session_id;
        text = JSON.stringify(created);
      }
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' }).end(text);
    });
    let sessionSeen = '';
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    // a wallet whose owner trusts the proxy's host as a service host (else the slug is refused first, MERCHANT_NOT_ALLOWED)
    const trusting = await launch({ ...LIMITS, SVC_MCP_ALLOWED_MERCHANTS: allowList, SVC_MCP_SERVICE_URL: `${app.baseUrl},${proxyUrl}` });
    try {
      const r = await trusting.call('buy', { merchant: `${proxyUrl}/m/${shop.merchant.slug}`, items: [{ sku: 'tea', qty: 1 }] });
      expect(r.isError).toBe(true);
      expect(body(r).reason_codes).toEqual(['PAYMENT_REQUIREMENT_INVALID']);
      expect(sessionSeen).toMatch(/^sess_/);
      expect(await attemptsOf(sessionSeen)).toEqual([]);
      expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '4.50', pending_today: '0.00' });
    } finally {
      await trusting.close();
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });

  it('GIVEN bad input to every tool THEN each answers a tool error and the server keeps serving', async () => {
    const m = url(shop.merchant.slug);
    const bad: Array<[string, Record<string, unknown>, string | null]> = [
      ['discover_merchant', {}, null],
      ['discover_merchant', { url: 42 }, null],
      ['discover_merchant', { url: 'http://[not a host' }, 'INPUT_INVALID'],
      ['discover_merchant', { url: `http://127.0.0.1:1/m/x` }, 'MERCHANT_UNREACHABLE'],
      ['discover_merchant', { url: `${app.baseUrl}/m/mrch_nosuchmerchant` }, 'NOT_FOUND'],
      // a URL holding the key: the error message echoes the URL, the redactor removes the key from it
      ['discover_merchant', { url: `http://127.0.0.1:1/m/${KEY_HEX}` }, 'MERCHANT_UNREACHABLE'],
      ['list_products', { merchant: `http://127.0.0.1:1/m/${KEY.toUpperCase().replace('0X', '0x')}` }, 'MERCHANT_UNREACHABLE'],
      ['list_products', {}, null],
      ['list_products', { merchant: ['a'] }, null],
      ['buy', { merchant: m }, null],
      ['buy', { merchant: m, items: 'coffee' }, null],
      ['buy', { merchant: m, items: [] }, null],
      ['buy', { merchant: m, items: [{ sku: 'coffee', qty: 1e9 }] }, null],
      ['buy', { merchant: m, items: [{ sku: 'coffee', qty: -1 }] }, null],
      ['buy', { merchant: m, items: [{ sku: 'coffee', qty: 1 }, { sku: 'coffee', qty: 1 }] }, null],
      ['buy', { merchant: m, items: [{ sku: 'no-such-sku', qty: 1 }] }, 'SKU_UNKNOWN'],
      ['buy', { merchant: m, items: [{ sku: 'coffee', qty: 1 }], mandate: { type: 'bogus' } }, null],
      ['get_order_status', {}, null],
      ['get_order_status', { merchant: m, session_id: 'cs_doesnotexist' }, 'SESSION_NOT_FOUND'],
      ['verify_receipt', { merchant: m }, null],
      ['verify_receipt', { merchant: m, receipt: 'not-a-jws' }, 'RECEIPT_MALFORMED'],
      ['verify_receipt', { merchant: m, receipt: KEY }, 'RECEIPT_MALFORMED'],
    ];
    for (const [name, args, code] of bad) {
      const r = await buyer.call(name, args);
      expect(r.isError, `${name} ${JSON.stringify(args)}: ${text(r)}`).toBe(true);
      if (code) expect(body(r).reason_codes, `${name} ${JSON.stringify(args)}`).toContain(code);
    }
    const unknownTool = await buyer.client.callTool({ name: 'send_all_funds', arguments: {} }).catch((e: Error) => ({ isError: true, content: [{ type: 'text', text: e.message }] }));
    expect(unknownTool.isError).toBe(true);
    // nothing bought, nothing counted, still serving
    expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '4.50', pending_today: '0.00' });
  });

  it('GIVEN a restart on the same spending file WHEN the agent buys 6.00 THEN it is still refused by the daily limit', async () => {
    await buyer.close();
    expect(JSON.parse(readFileSync(SPENDING_FILE, 'utf8')).entries).toMatchObject({ [`${shop.merchant.id}/${firstOrder.session_id}`]: { amount: '4500000', status: 'spent' } });
    buyer = await launch({ ...LIMITS, SVC_MCP_ALLOWED_MERCHANTS: allowList });

    expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '4.50', remaining_today: '5.50' });
    const refused = await buyer.call('buy', { merchant: url(shop.merchant.slug), items: [{ sku: 'tea', qty: 2 }] });
    expect(body(refused)).toMatchObject({ reason_codes: ['LIMIT_PER_DAY_EXCEEDED'], over_by: '0.50' });
    expect(await attemptsOf(body(refused).session_id)).toEqual([]);
  });

  it('GIVEN 5.50 left today WHEN two 4.50 purchases run at once THEN exactly one is signed and accepted (the day is reserved before signing)', async () => {
    const both = await Promise.all([0, 1].map(() => buyer.call('buy', { merchant: url(shop.merchant.slug), items: [{ sku: 'coffee', qty: 1 }] })));
    const statuses = both.map((r) => body(r).status ?? body(r).reason_codes[0]).sort();
    expect(statuses).toEqual(['LIMIT_PER_DAY_EXCEEDED', 'accepted']);
    const refusedOne = both.find((r) => r.isError)!;
    expect(await attemptsOf(body(refusedOne).session_id)).toEqual([]);
    expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '9.00', pending_today: '0.00', remaining_today: '1.00' });
  });

  it('GIVEN a merchant that holds orders for review WHEN the agent buys THEN an actionable hold, counted as pending; declined, it stays counted until its authorization expires', async () => {
    const held = await buyer.call('buy', { merchant: url(heldShop.merchant.id), items: [{ sku: 'sticker', qty: 1 }] });
    expect(held.isError, text(held)).toBeFalsy();
    expect(body(held)).toMatchObject({ status: 'hold', amount: '0.50' });
    expect(body(held).next).toContain('get_order_status');
    expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '9.00', pending_today: '0.50', remaining_today: '0.50' });
    const still = await buyer.call('get_order_status', { merchant: url(heldShop.merchant.id), session_id: body(held).session_id });
    expect(body(still)).toMatchObject({ status: 'held' });

    const decline = await app.request('POST', `/v1/sessions/${body(held).session_id}/decline`, { key: heldShop.key });
    expect(decline.status, decline.text).toBe(200);
    const after = await buyer.call('get_order_status', { merchant: url(heldShop.merchant.id), session_id: body(held).session_id });
    expect(after.isError).toBe(true);
    expect(body(after)).toMatchObject({ status: 'rejected', reason_codes: ['MERCHANT_DECLINED'] });
    // The declined authorization is signed and valid for a few more minutes: counted until it expires.
    const entry = JSON.parse(readFileSync(SPENDING_FILE, 'utf8')).entries[`${heldShop.merchant.id}/${body(held).session_id}`];
    expect(entry).toMatchObject({ status: 'void', amount: '500000' });
    expect(entry.valid_before).toBeGreaterThan(Date.now() / 1000);
    expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '9.00', pending_today: '0.50', remaining_today: '0.50' });
  });

  it('GIVEN a held order the merchant approves after its authorization expired WHEN the agent asks its status THEN the wallet signs a fresh authorization for the same counted amount and the order settles', async () => {
    const held = await buyer.call('buy', { merchant: url(heldShop.merchant.id), items: [{ sku: 'sticker', qty: 1 }] });
    expect(body(held)).toMatchObject({ status: 'hold', amount: '0.50' });
    expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '9.00', pending_today: '1.00', remaining_today: '0.00' });
    // the review outlasts the 300 s authorization
    const realNow = app.services.now;
    const later = new Date(Date.now() + 400_000);
    app.services.now = () => later;
    let approved;
    try {
      approved = await app.request('POST', `/v1/sessions/${body(held).session_id}/approve`, { key: heldShop.key });
    } finally {
      app.services.now = realNow;
    }
    expect(approved.status, approved.text).toBe(202);
    expect(approved.body.status).toBe('awaiting_reauthorization');

    const done = await buyer.call('get_order_status', { merchant: url(heldShop.merchant.id), session_id: body(held).session_id });
    expect(done.isError, text(done)).toBeFalsy();
    expect(body(done)).toMatchObject({ status: 'accepted', amount: '0.50', receipt_verified: true });
    expect(await ordersOf(app, body(held).session_id)).toMatchObject([{ id: body(done).order_id, decision: 'accept', settlement_ref: body(done).reference }]);
    // counted once: the reservation became spent, no second 0.50
    expect(body(await buyer.call('spending'))).toMatchObject({ spent_today: '9.50', pending_today: '0.50', remaining_today: '0.00' });
    await buyer.close();
  });

  it('GIVEN a wallet that allows only base WHEN the agent buys from a base-sepolia merchant THEN CHAIN_NOT_ALLOWED before any checkout', async () => {
    const before = (await sessionsOf(shop.merchant.id)).length;
    buyer = await launch({ ...LIMITS, SVC_MCP_ALLOWED_CHAINS: 'base' });
    const found = await buyer.call('discover_merchant', { url: url(shop.merchant.id) });
    expect(body(found)).toMatchObject({ allowed_merchant: true, allowed_chain: false, can_buy: false });
    const r = await buyer.call('buy', { merchant: url(shop.merchant.id), items: [{ sku: 'tea', qty: 1 }] });
    expect(r.isError).toBe(true);
    expect(body(r)).toMatchObject({ reason_codes: ['CHAIN_NOT_ALLOWED'], chain: 'base-sepolia', allowed_chains: ['base'] });
    expect(await sessionsOf(shop.merchant.id)).toHaveLength(before);
    await buyer.close();
  });

  it('GIVEN a bad configuration THEN the bin stops with one line naming the variable, and never echoes the key', async () => {
    const env = { PATH: process.env.PATH ?? '', HOME: work, NODE_OPTIONS: '' };
    const shortKey = await runCommand(process.execPath, [BIN], { env: { ...env, SVC_WALLET_PRIVATE_KEY: KEY.slice(0, -1) }, timeoutMs: 60_000 });
    expect(shortKey.code).toBe(2);
    expect(shortKey.stderr.trim()).toBe('svc-mcp: SVC_WALLET_PRIVATE_KEY must be 32 bytes of hex (64 hex digits, 0x optional)');
    const badLimit = await runCommand(process.execPath, [BIN], { env: { ...env, SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_MAX_PER_DAY: '1e3' }, timeoutMs: 60_000 });
    expect(badLimit.code).toBe(2);
    expect(badLimit.stderr).toContain('SVC_MCP_MAX_PER_DAY must be a decimal amount');
    const badChain = await runCommand(process.execPath, [BIN], { env: { ...env, SVC_WALLET_PRIVATE_KEY: KEY, SVC_MCP_ALLOWED_CHAINS: 'ethereum' }, timeoutMs: 60_000 });
    expect(badChain.code).toBe(2);
    expect(badChain.stderr).toContain('SVC_MCP_ALLOWED_CHAINS: unknown chain "ethereum"');
    transcript.push(shortKey.stdout, shortKey.stderr, badLimit.stdout, badLimit.stderr, badChain.stdout, badChain.stderr);
  });

  it('GIVEN everything the children printed and answered THEN the key and its hex body never appear (and the redactor did work)', () => {
    const all = transcript.join('\n');
    expect(all.length).toBeGreaterThan(10_000);
    expect(all.toLowerCase()).not.toContain(KEY_HEX.toLowerCase());
    expect(all.toLowerCase()).not.toContain(KEY_HEX.slice(0, 63).toLowerCase());
    expect(all).toContain('[REDACTED]');
    expect(all).toContain(wallet.address);
  });
});
