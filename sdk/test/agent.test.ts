import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CompactSign, exportJWK, generateKeyPair } from 'jose';
import { createWalletClient, custom, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  AgentClient,
  DiscoveryError,
  PaymentRequirementError,
  ReceiptVerificationError,
  ResolutionTimeoutError,
  SvcConflictError,
  SvcNotFoundError,
  verifyReceipt,
  type MerchantClient,
  type SettleOutcome,
} from '../src/index.js';
import { TestApp, type TestKey } from '../../server/test/helpers/harness.js';
import { hostRoutingFetch, merchantClient, setupShop, caught } from './helpers.js';
import { DomainProofWorld } from '../../server/test/helpers/domain-proof.js';

let app: TestApp;
let key: TestKey;
let svc: MerchantClient;

beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
  svc = merchantClient(app, key);
});
afterAll(async () => app?.stop());

function newAgent(opts: { fetch?: ReturnType<typeof hostRoutingFetch> } = {}) {
  return new AgentClient({ account: privateKeyToAccount(generatePrivateKey()), agentId: randomUUID(), fetch: opts.fetch });
}

function expectStatus<S extends SettleOutcome['status']>(outcome: SettleOutcome, status: S): asserts outcome is Extract<SettleOutcome, { status: S }> {
  if (outcome.status !== status) throw new Error(`expected ${status}, got ${JSON.stringify(outcome)}`);
}

describe('agent buy flow (x402, test mode)', () => {
  it('GIVEN a published merchant WHEN an agent discovers it by its /m/<id>/ base, browses and buys THEN the signed payment settles and the receipt verifies', async () => {
    const merchant = await setupShop(svc);
    const agent = newAgent();
    const shop = await agent.discover(`${app.baseUrl}/m/${merchant.id}/`);
    expect(shop.merchantId).toBe(merchant.id);
    expect(shop.baseUrl).toBe(`${app.baseUrl}/m/${merchant.id}`);
    expect(shop.manifest.protocol).toBe('svc-checkout/0.1');

    const items = await shop.catalog();
    expect(items.map((i) => i.sku).sort()).toEqual(['beans', 'coffee']);

    const session = await shop.checkout([{ sku: 'coffee', qty: 2 }, { sku: 'beans', qty: 1 }], { buyer_intent: 'restock the office' });
    expect(session.payment_required).toMatchObject({ rail: 'x402', amountBaseUnits: '21000000', chain: 'base-sepolia', eip712Domain: { name: 'USDC', version: '2' } });
    const outcome = await shop.pay(session);
    expectStatus(outcome, 'accepted');
    expect(outcome.session_id).toBe(session.session_id);
    expect(outcome.fulfillment.reference).toMatch(/^0x[0-9a-f]{64}$/);

    const claims = await shop.verifyReceipt(outcome.receipt);
    expect(claims).toMatchObject({
      iss: 'svc-checkout',
      orderId: outcome.order_id,
      sessionId: session.session_id,
      merchantId: merchant.id,
      agentId: agent.agentId,
      decision: 'accept',
      settlementRef: outcome.fulfillment.reference,
      total: { currency: 'USD', total: '21.00' },
      livemode: false,
      chain: 'base-sepolia',
    });
    const byUrl = await verifyReceipt(outcome.receipt, { jwksUrl: `${app.baseUrl}/v1/merchants/${merchant.id}/jwks`, expected: { orderId: outcome.order_id } });
    expect(byUrl.sub).toBe(claims.sub);
    const byKeys = await verifyReceipt(outcome.receipt, { jwks: await svc.merchants.jwks(merchant.id) });
    expect(byKeys.inputFingerprint).toMatch(/^[0-9a-f]{64}$/);

    const view = await shop.session(session.session_id);
    expect(view).toMatchObject({ state: 'accepted', orderId: outcome.order_id, receipt: outcome.receipt });
    const orders = await svc.orders.list({ merchant_id: merchant.id }).page();
    expect(orders.data[0]).toMatchObject({ id: outcome.order_id, decision: 'accept', agent_id: agent.agentId });
  });

  it('GIVEN a mock-rail checkout WHEN buying THEN the SDK pays with {mock: true} and gets a mock_ reference', async () => {
    const merchant = await setupShop(svc);
    const shop = await newAgent().discover(`${app.baseUrl}/m/${merchant.slug}`);
    const outcome = await shop.buy([{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    expectStatus(outcome, 'accepted');
    expect(outcome.fulfillment).toMatchObject({ rail: 'mock' });
    expect(outcome.fulfillment.reference).toMatch(/^mock_/);
    expect((await shop.verifyReceipt(outcome.receipt)).rail).toBe('mock');
  });

  it('GIVEN a JSON-RPC account with a wallet client WHEN buying THEN eth_signTypedData_v4 signs the authorization and it settles', async () => {
    const merchant = await setupShop(svc);
    const signer = privateKeyToAccount(generatePrivateKey());
    const calls: string[] = [];
    const walletClient = createWalletClient({
      transport: custom({
        async request({ method, params }: { method: string; params?: unknown }) {
          calls.push(method);
          if (method !== 'eth_signTypedData_v4') throw new Error(`unexpected ${method}`);
          const [, json] = params as [string, string];
          const td = JSON.parse(json) as { domain: Record<string, unknown>; message: Record<string, string> };
          const m = td.message;
          return signer.signTypedData({
            domain: { ...td.domain, chainId: Number(td.domain.chainId) },
            types: { TransferWithAuthorization: [
              { name: 'from', type: 'address' },
              { name: 'to', type: 'address' },
              { name: 'value', type: 'uint256' },
              { name: 'validAfter', type: 'uint256' },
              { name: 'validBefore', type: 'uint256' },
              { name: 'nonce', type: 'bytes32' },
            ] },
            primaryType: 'TransferWithAuthorization',
            message: { from: m.from as Hex, to: m.to as Hex, value: BigInt(m.value!), validAfter: BigInt(m.validAfter!), validBefore: BigInt(m.validBefore!), nonce: m.nonce as Hex },
          });
        },
      }),
    });
    const agent = new AgentClient({ account: { type: 'json-rpc', address: signer.address }, walletClient });
    const outcome = await (await agent.discover(`${app.baseUrl}/m/${merchant.id}`)).buy([{ sku: 'beans', qty: 1 }]);
    expectStatus(outcome, 'accepted');
    expect(calls).toEqual(['eth_signTypedData_v4']);
    expect(() => new AgentClient({ account: { type: 'json-rpc', address: signer.address } })).toThrow(/walletClient/);
  });
});

describe('discovery forms', () => {
  it('GIVEN the merchant domain pointed at the service and verified WHEN discovering by host THEN the manifest prefix is the root and checkout next calls keep it', async () => {
    const merchant = await setupShop(svc);
    const world = await DomainProofWorld.start();
    try {
      world.install(app);
      const refused = await caught(svc.merchants.verifyDomain(merchant.id));
      expect(refused).toMatchObject({ status: 422, reasonCodes: ['DOMAIN_VERIFICATION_FAILED'] });
      world.publishTxt(merchant.domain, merchant.domain_verification.dns_txt.value);
      expect((await svc.merchants.verifyDomain(merchant.id)).domain_status).toBe('verified');
    } finally {
      await world.close();
    }
    const port = new URL(app.baseUrl).port;
    const agent = newAgent({ fetch: hostRoutingFetch(app.baseUrl) });
    const shop = await agent.discover(`http://${merchant.domain}:${port}`);
    expect(shop.manifestUrl).toBe(`http://${merchant.domain}:${port}/.well-known/agentic-checkout.json`);
    expect(shop.baseUrl).toBe(`http://${merchant.domain}:${port}`);
    const session = await shop.checkout([{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    expect(session.next).toContain(`POST /agent/checkout/${session.session_id}/settle`);
    const outcome = await shop.pay(session);
    expectStatus(outcome, 'accepted');
    expect((await shop.verifyReceipt(outcome.receipt)).merchantId).toBe(merchant.id);
  });

  it('GIVEN the discovery host <slug>.<discovery domain> WHEN discovering without a scheme THEN it resolves to the merchant', async () => {
    const merchant = await setupShop(svc);
    const port = new URL(app.baseUrl).port;
    const shop = await newAgent({ fetch: hostRoutingFetch(app.baseUrl) }).discover(`${merchant.slug}.svc.localhost:${port}`);
    expect(shop.merchantId).toBe(merchant.id);
    expect((await shop.catalog()).map((i) => i.sku).sort()).toEqual(['beans', 'coffee']);
  });

  it('GIVEN an unknown merchant or a document that is not a manifest WHEN discovering THEN typed errors', async () => {
    expect(await caught(newAgent().discover(`${app.baseUrl}/m/no-such-shop`))).toBeInstanceOf(SvcNotFoundError);
    const other = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"hello":"world"}');
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
    try {
      const err = await caught(newAgent().discover(`http://127.0.0.1:${(other.address() as AddressInfo).port}`));
      expect(err).toBeInstanceOf(DiscoveryError);
    } finally {
      await new Promise<void>((r) => other.close(() => r()));
    }
  });
});

describe('settle outcomes', () => {
  it('GIVEN a payment to the wrong address WHEN paying THEN payment_invalid is a typed result and the session can still be paid', async () => {
    const merchant = await setupShop(svc);
    const shop = await newAgent().discover(`${app.baseUrl}/m/${merchant.id}`);
    const session = await shop.checkout([{ sku: 'coffee', qty: 1 }]);
    const wrong = { ...session, payment_required: { ...session.payment_required, payTo: '0x2222222222222222222222222222222222222222' } };
    const invalid = await shop.pay(wrong);
    expectStatus(invalid, 'payment_invalid');
    expect(invalid.reason_codes).toEqual(['PAYMENT_RECIPIENT_MISMATCH']);
    const ok = await shop.pay(session);
    expectStatus(ok, 'accepted');
  });

  it('GIVEN a merchant that blocks the agent WHEN buying THEN rejected is a typed result with the policy code', async () => {
    const agent = newAgent();
    const merchant = await setupShop(svc, { requireMandateOverUsd: null, holdForReviewBelowTier: null, blockedAgents: [agent.agentId] });
    const outcome = await (await agent.discover(`${app.baseUrl}/m/${merchant.id}`)).buy([{ sku: 'coffee', qty: 1 }]);
    expectStatus(outcome, 'rejected');
    expect(outcome.reason_codes).toContain('AGENT_BLOCKED');
  });

  it('GIVEN a settled session WHEN the same payment is repeated THEN it replays, and another payment is SvcConflictError SESSION_ALREADY_SETTLED', async () => {
    const merchant = await setupShop(svc);
    const agent = newAgent();
    const shop = await agent.discover(`${app.baseUrl}/m/${merchant.id}`);
    const session = await shop.checkout([{ sku: 'coffee', qty: 1 }]);
    const body = await agent.paymentFor(session.payment_required);
    const first = await shop.settle(session.session_id, body);
    const again = await shop.settle(session.session_id, body);
    expect(again).toEqual(first);
    const err = await caught(shop.pay(session));
    expect(err).toBeInstanceOf(SvcConflictError);
    expect((err as SvcConflictError).reasonCodes).toEqual(['SESSION_ALREADY_SETTLED']);
    const missing = await caught(shop.pay({ ...session, session_id: 'sess_00000000000000000000000000' }));
    expect(missing).toBeInstanceOf(SvcNotFoundError);
    expect((missing as SvcNotFoundError).reasonCodes).toEqual(['SESSION_NOT_FOUND']);
  });

  it('GIVEN a card-rail requirement WHEN paying THEN PaymentRequirementError is thrown before any request', async () => {
    const merchant = await setupShop(svc);
    const shop = await newAgent().discover(`${app.baseUrl}/m/${merchant.id}`);
    const session = await shop.checkout([{ sku: 'coffee', qty: 1 }]);
    const card = { ...session, payment_required: { ...session.payment_required, rail: 'card' as const } };
    expect(await caught(shop.pay(card))).toBeInstanceOf(PaymentRequirementError);
  });
});

describe('held sessions', () => {
  const HOLD_POLICY = { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: 'standard' } as const;

  it('GIVEN an unknown agent held for review WHEN the merchant approves through the SDK while the agent waits THEN the agent resolves to accepted with a verifiable receipt', async () => {
    const merchant = await setupShop(svc, HOLD_POLICY);
    const shop = await newAgent().discover(`${app.baseUrl}/m/${merchant.id}`);
    const held = await shop.buy([{ sku: 'beans', qty: 1 }]);
    expectStatus(held, 'hold');
    expect(held.review_url).toBe(`${app.baseUrl}/dashboard/test/holds/${held.session_id}`);
    expect(held.reason_codes).toContain('HOLD_FOR_REVIEW');

    const waiting = held.waitForResolution({ intervalMs: 50, timeoutMs: 60_000 });
    const review = await svc.sessions.get(held.session_id);
    expect(review.state).toBe('held');
    const approved = await svc.sessions.approve(held.session_id);
    if (approved.status !== 'accepted') throw new Error(`approve answered ${approved.status}`);

    const resolved = await waiting;
    expectStatus(resolved, 'accepted');
    expect(resolved.order_id).toBe(approved.order_id);
    expect(resolved.receipt).toBe(approved.receipt);
    expect((await shop.verifyReceipt(resolved.receipt)).orderId).toBe(approved.order_id);
  });

  it('GIVEN a hold approved after its authorization expired WHEN the agent waits THEN waitForResolution signs a fresh authorization and settles it without another hold', async () => {
    const merchant = await setupShop(svc, HOLD_POLICY);
    const shop = await newAgent().discover(`${app.baseUrl}/m/${merchant.id}`);
    const held = await shop.buy([{ sku: 'beans', qty: 1 }]);
    expectStatus(held, 'hold');
    const realNow = app.services.now;
    // The SDK signs authorizations valid for minutes; the review took longer.
    app.services.now = () => new Date(Date.now() + 3_600_000);
    let approved;
    try {
      approved = await svc.sessions.approve(held.session_id);
    } finally {
      app.services.now = realNow;
    }
    expect(approved.status).toBe('awaiting_reauthorization');
    expect((await shop.session(held.session_id)).state).toBe('approved');

    const resolved = await held.waitForResolution({ intervalMs: 50, timeoutMs: 30_000 });
    expectStatus(resolved, 'accepted');
    expect(resolved.order_id).toBe(approved.order_id);
    expect((await shop.verifyReceipt(resolved.receipt)).orderId).toBe(approved.order_id);
    expect((await shop.session(held.session_id)).state).toBe('accepted');
  });

  it('GIVEN a held session WHEN the merchant declines THEN waitForResolution returns rejected MERCHANT_DECLINED', async () => {
    const merchant = await setupShop(svc, HOLD_POLICY);
    const shop = await newAgent().discover(`${app.baseUrl}/m/${merchant.id}`);
    const held = await shop.buy([{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    expectStatus(held, 'hold');
    const waiting = held.waitForResolution({ intervalMs: 50, timeoutMs: 60_000 });
    expect(await svc.sessions.decline(held.session_id)).toMatchObject({ status: 'rejected', session_id: held.session_id });
    const resolved = await waiting;
    expectStatus(resolved, 'rejected');
    expect(resolved.reason_codes).toEqual(['MERCHANT_DECLINED']);
    expect(resolved.error_human).toMatch(/declined/);
  });

  it('GIVEN nobody reviews WHEN the wait runs out THEN ResolutionTimeoutError names the held state', async () => {
    const merchant = await setupShop(svc, HOLD_POLICY);
    const shop = await newAgent().discover(`${app.baseUrl}/m/${merchant.id}`);
    const held = await shop.buy([{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    expectStatus(held, 'hold');
    const err = await caught(held.waitForResolution({ intervalMs: 20, timeoutMs: 100 }));
    expect(err).toBeInstanceOf(ResolutionTimeoutError);
    expect((err as ResolutionTimeoutError).lastState).toBe('held');
  });
});

describe('receipt verification failures', () => {
  let receipt: string;
  let merchantId: string;
  beforeAll(async () => {
    const merchant = await setupShop(svc);
    merchantId = merchant.id;
    const outcome = await (await newAgent().discover(`${app.baseUrl}/m/${merchant.id}`)).buy([{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    expectStatus(outcome, 'accepted');
    receipt = outcome.receipt;
  });

  const reasonOf = async (p: Promise<unknown>) => {
    const err = await caught(p);
    expect(err).toBeInstanceOf(ReceiptVerificationError);
    return (err as ReceiptVerificationError).reason;
  };

  it('GIVEN a tampered payload, another merchant key set or a wrong expectation WHEN verifying THEN the reason says which check failed', async () => {
    const jwks = await svc.merchants.jwks(merchantId);
    const [h, p, s] = receipt.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, total: { currency: 'USD', subtotal: '0.01', tax: '0.00', total: '0.01' } })).toString('base64url')}.${s}`;
    expect(await reasonOf(verifyReceipt(forged, { jwks }))).toBe('RECEIPT_SIGNATURE_INVALID');

    const otherMerchant = await setupShop(svc);
    expect(await reasonOf(verifyReceipt(receipt, { jwks: await svc.merchants.jwks(otherMerchant.id) }))).toBe('RECEIPT_KID_UNKNOWN');
    expect(await reasonOf(verifyReceipt(receipt, { jwks, expected: { merchantId: otherMerchant.id } }))).toBe('RECEIPT_CLAIM_MISMATCH');
    expect(await reasonOf(verifyReceipt('not-a-jws', { jwks }))).toBe('RECEIPT_MALFORMED');
    expect(await reasonOf(verifyReceipt(receipt, { jwksUrl: `${app.baseUrl}/v1/merchants/mrch_00000000000000000000000000/jwks` }))).toBe('JWKS_UNAVAILABLE');
  });

  it('GIVEN a correctly signed JWS with the wrong typ or issuer WHEN verifying THEN RECEIPT_TYP_INVALID or RECEIPT_ISSUER_INVALID', async () => {
    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const kid = 'attacker-receipts-v1';
    const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid }] };
    const claims = JSON.parse(Buffer.from(receipt.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    const sign = (header: { alg: string; typ: string; kid: string }, body: Record<string, unknown>) =>
      new CompactSign(new TextEncoder().encode(JSON.stringify(body))).setProtectedHeader(header).sign(privateKey);

    const jwt = await sign({ alg: 'EdDSA', typ: 'JWT', kid }, claims);
    expect(await reasonOf(verifyReceipt(jwt, { jwks }))).toBe('RECEIPT_TYP_INVALID');
    const otherIssuer = await sign({ alg: 'EdDSA', typ: 'svc-receipt+jws', kid }, { ...claims, iss: 'someone-else' });
    expect(await reasonOf(verifyReceipt(otherIssuer, { jwks }))).toBe('RECEIPT_ISSUER_INVALID');
    const good = await sign({ alg: 'EdDSA', typ: 'svc-receipt+jws', kid }, claims);
    expect((await verifyReceipt(good, { jwks })).orderId).toBe(claims.orderId);
  });
});

describe('agent client options', () => {
  it('GIVEN a non-UUID agent id WHEN constructing THEN it throws', () => {
    expect(() => new AgentClient({ account: privateKeyToAccount(generatePrivateKey()), agentId: 'agent-1' })).toThrow(/UUID/);
  });
});
