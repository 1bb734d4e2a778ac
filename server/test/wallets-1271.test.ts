import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePaymentResponseHeader, wrapFetchWithPaymentFromConfig } from '@x402/fetch';
import { ExactEvmScheme } from '@x402/evm';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { ordersOf, settle } from './helpers/agent-protocol.js';
import { publishedLiveEspresso, publishedMerchant, signPayment } from './helpers/agent.js';
import { TestApp } from './helpers/harness.js';
import { startLiveApp } from './helpers/live.js';
import { startX402Facilitator, X402_FACILITATOR_TOKEN } from './helpers/x402-facilitator.js';
import type { Server } from 'node:http';
import { deployWallet, hasCode, installWalletFactories, smartWalletSigner, UNLISTED_FACTORY, WALLET_FACTORY, walletAddress } from './helpers/wallets.js';
import { MULTICALL3 } from '../src/rails/contract-wallets.js';

/**
 * Smart-contract wallets as payers (docs/settlement.md "Smart-contract wallets"): a real
 * ERC-1271 wallet (server/test/chain/SmartWallet.sol, owner-signed, 160-byte signatures) pays
 * on anvil in live mode through the JSON settle and an unmodified @x402/fetch client; an
 * undeployed one pays with an ERC-6492 signature and ends deployed. Test mode checks the same
 * signatures on a test chain (anvil as Base Sepolia), and without one refuses them.
 */
let live: Anvil;
let sepolia: Anvil;
let app: TestApp;
let bare: TestApp;
let remote: TestApp;
let facilitator: { url: string; server: Server };
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
let liveBase: string;
let espresso: string;

beforeAll(async () => {
  [live, sepolia] = await Promise.all([startAnvil(), startAnvil({ chainId: 84532, token: 'none' })]);
  await Promise.all([installWalletFactories(live), installWalletFactories(sepolia)]);
  app = await startLiveApp(live, relayerKeys, { SVC_ERC6492_FACTORIES: WALLET_FACTORY, SVC_RPC_URL_BASE_SEPOLIA: sepolia.rpcUrl });
  bare = await TestApp.start();
  facilitator = await startX402Facilitator(live, { settleDelayMs: 0, seenAuth: [], calls: [] });
  remote = await TestApp.start({
    SVC_LIVE_FACILITATOR: 'remote',
    SVC_FACILITATOR_URL: facilitator.url,
    SVC_FACILITATOR_AUTH_HEADER: `Authorization: Bearer ${X402_FACILITATOR_TOKEN}`,
    SVC_RPC_URL_BASE: live.rpcUrl,
    SVC_ERC6492_FACTORIES: WALLET_FACTORY,
  });
  const key = await app.key('live');
  const shop = await publishedMerchant(app, {
    key,
    merchant: { receiving: { x402: { chain: 'base', address: privateKeyToAccount(generatePrivateKey()).address } } },
    products: [{ sku: 'coffee', amount: '4.50' }],
    policy: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null },
  });
  liveBase = shop.base;
  const esp = await publishedLiveEspresso(app, await app.key('live'));
  espresso = esp.shop.base;
}, 180_000);
afterAll(async () => {
  await app?.stop();
  await bare?.stop();
  await remote?.stop();
  facilitator?.server.close();
  await live?.stop();
  await sepolia?.stop();
});

async function open(a: TestApp, base: string, sku = 'coffee') {
  const r = await a.request('POST', `${base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku, qty: 1 }] } });
  expect(r.status, r.text).toBe(201);
  return { id: r.body.session_id as string, pr: r.body.payment_required };
}

let salt = 1n;
/** A funded, deployed wallet of a fresh owner on the live chain. */
async function deployedWallet(usdc = 20_000_000n) {
  const owner = privateKeyToAccount(generatePrivateKey());
  const address = await deployWallet(live, owner.address, salt++);
  await live.mintUsdc(address, usdc);
  return { owner, address };
}

describe('live mode: a smart-contract wallet pays on chain', () => {
  it('GIVEN a deployed ERC-1271 wallet WHEN it settles over JSON with a 160-byte signature THEN USDC moves once by exactly the price from the wallet, through the bytes overload; one order; the same authorization again is NONCE_ALREADY_USED', async () => {
    const { owner, address } = await deployedWallet();
    const s = await open(app, liveBase);
    const payTo = s.pr.payTo as Address;
    const before = { wallet: await live.usdcBalance(address), merchant: await live.usdcBalance(payTo) };
    const paid = await signPayment(smartWalletSigner(owner, address), s.pr);
    expect((paid.payment.signature.length - 2) / 2).toBe(160);

    const r = await settle(app, liveBase, s.id, paid);
    expect(r.status, r.text).toBe(200);
    expect(r.body.status).toBe('accepted');
    const tx = r.body.fulfillment.reference as Hex;
    const receipt = await live.client.getTransactionReceipt({ hash: tx });
    expect(receipt.status).toBe('success');
    expect(receipt.to?.toLowerCase()).toBe(USDC_BASE.toLowerCase());
    expect(await live.usdcBalance(address)).toBe(before.wallet - 4_500_000n);
    expect(await live.usdcBalance(payTo)).toBe(before.merchant + 4_500_000n);
    expect(await ordersOf(app, s.id)).toHaveLength(1);

    // the same authorization on another session: refused, nothing moves
    const again = await open(app, liveBase);
    const replay = await settle(app, liveBase, again.id, paid);
    expect(replay.status, replay.text).toBe(402);
    expect(replay.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);
    expect(await live.usdcBalance(address)).toBe(before.wallet - 4_500_000n);
  });

  it('GIVEN a deployed wallet WHEN the signature is by a key that is not its owner THEN SIGNER_MISMATCH (its isValidSignature refused), nothing moves, no order', async () => {
    const { owner, address } = await deployedWallet();
    const s = await open(app, liveBase);
    const before = await live.usdcBalance(address);
    const forged = await signPayment(smartWalletSigner(owner, address, { signer: privateKeyToAccount(generatePrivateKey()) }), s.pr);
    const r = await settle(app, liveBase, s.id, forged);
    expect(r.status, r.text).toBe(402);
    expect(r.body.reason_codes).toEqual(['SIGNER_MISMATCH']);
    expect(await live.usdcBalance(address)).toBe(before);
    expect(await ordersOf(app, s.id)).toHaveLength(0);
  });

  it('GIVEN an undeployed wallet WHEN it pays with an ERC-6492 signature through the allowed factory THEN one transaction deploys it and pays: the wallet ends deployed, USDC moved once, one order', async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const mySalt = salt++;
    const address = await walletAddress(live, owner.address, mySalt);
    await live.mintUsdc(address, 10_000_000n);
    expect(await hasCode(live, address)).toBe(false);
    const s = await open(app, liveBase);
    const payTo = s.pr.payTo as Address;
    const merchantBefore = await live.usdcBalance(payTo);

    const r = await settle(app, liveBase, s.id, await signPayment(smartWalletSigner(owner, address, { deploy: { factory: WALLET_FACTORY, salt: mySalt } }), s.pr));
    expect(r.status, r.text).toBe(200);
    const receipt = await live.client.getTransactionReceipt({ hash: r.body.fulfillment.reference as Hex });
    expect(receipt.status).toBe('success');
    expect(receipt.to?.toLowerCase()).toBe(MULTICALL3.toLowerCase());
    expect(await hasCode(live, address)).toBe(true);
    expect(await live.usdcBalance(address)).toBe(10_000_000n - 4_500_000n);
    expect(await live.usdcBalance(payTo)).toBe(merchantBefore + 4_500_000n);
    expect(await ordersOf(app, s.id)).toHaveLength(1);
  });

  it('GIVEN an ERC-6492 signature whose factory is not allowed WHEN settled THEN ERC6492_FACTORY_NOT_ALLOWED: nothing deployed, nothing moved', async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const mySalt = salt++;
    const address = await walletAddress(live, owner.address, mySalt, UNLISTED_FACTORY);
    await live.mintUsdc(address, 10_000_000n);
    const s = await open(app, liveBase);
    const r = await settle(app, liveBase, s.id, await signPayment(smartWalletSigner(owner, address, { deploy: { factory: UNLISTED_FACTORY, salt: mySalt } }), s.pr));
    expect(r.status, r.text).toBe(402);
    expect(r.body.reason_codes).toEqual(['ERC6492_FACTORY_NOT_ALLOWED']);
    expect(await hasCode(live, address)).toBe(false);
    expect(await live.usdcBalance(address)).toBe(10_000_000n);
  });

  it('GIVEN a deployed wallet behind a smart-account signer WHEN an unmodified @x402/fetch client buys THEN 200, PAYMENT-RESPONSE names the wallet and the mined transfer, USDC moved once', async () => {
    const { owner, address } = await deployedWallet();
    const before = await live.usdcBalance(address);
    const pay = wrapFetchWithPaymentFromConfig(fetch, { schemes: [{ network: 'eip155:8453', client: new ExactEvmScheme(smartWalletSigner(owner, address)) }] });
    const res = await pay(`${app.baseUrl}${espresso}/x402/espresso`);
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, payer: address, transaction: body.fulfillment.reference });
    expect((await live.client.getTransactionReceipt({ hash: settled.transaction as Hex })).status).toBe('success');
    expect(await live.usdcBalance(address)).toBe(before - 750_000n);
  });
});

describe('live mode through a remote x402 facilitator', () => {
  it('GIVEN SVC_LIVE_FACILITATOR=remote (a stock @x402/evm facilitator) WHEN a deployed wallet settles with its long signature THEN the facilitator gets it as sent, settles on chain, USDC moved once, one order', async () => {
    const { owner, address } = await deployedWallet();
    const shop = await publishedLiveEspresso(remote, await remote.key('live'));
    const before = await live.usdcBalance(address);
    const s = await open(remote, shop.shop.base, 'espresso');
    const r = await settle(remote, shop.shop.base, s.id, await signPayment(smartWalletSigner(owner, address), s.pr));
    expect(r.status, r.text).toBe(200);
    expect((await live.client.getTransactionReceipt({ hash: r.body.fulfillment.reference as Hex })).status).toBe('success');
    expect(await live.usdcBalance(address)).toBe(before - 750_000n);
    expect(await live.usdcBalance(shop.payTo)).toBe(750_000n);
    expect(await ordersOf(remote, s.id)).toHaveLength(1);
  });
});

describe('test mode: the mock accepts exactly what live settles', () => {
  it('GIVEN a test chain (SVC_RPC_URL_BASE_SEPOLIA, anvil as Base Sepolia) WHEN wallets pay in test mode THEN a deployed wallet and an allowed ERC-6492 one settle; a foreign key is SIGNER_MISMATCH; an unlisted factory is ERC6492_FACTORY_NOT_ALLOWED; a replayed nonce is NONCE_ALREADY_USED', async () => {
    const shop = await publishedMerchant(app);
    const owner = privateKeyToAccount(generatePrivateKey());
    const address = await deployWallet(sepolia, owner.address, 7n);

    const s1 = await open(app, shop.base);
    const paid = await signPayment(smartWalletSigner(owner, address), s1.pr);
    const ok = await settle(app, shop.base, s1.id, paid);
    expect(ok.status, ok.text).toBe(200);
    expect(await ordersOf(app, s1.id)).toHaveLength(1);

    const s2 = await open(app, shop.base);
    const replay = await settle(app, shop.base, s2.id, paid);
    expect(replay.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);

    const forged = await settle(app, shop.base, s2.id, await signPayment(smartWalletSigner(owner, address, { signer: privateKeyToAccount(generatePrivateKey()) }), s2.pr));
    expect(forged.status, forged.text).toBe(402);
    expect(forged.body.reason_codes).toEqual(['SIGNER_MISMATCH']);

    const fresh = privateKeyToAccount(generatePrivateKey());
    const counterfactual = await walletAddress(sepolia, fresh.address, 8n);
    const s3 = await open(app, shop.base);
    const viaFactory = await settle(app, shop.base, s3.id, await signPayment(smartWalletSigner(fresh, counterfactual, { deploy: { factory: WALLET_FACTORY, salt: 8n } }), s3.pr));
    expect(viaFactory.status, viaFactory.text).toBe(200);

    const unlisted = await walletAddress(sepolia, fresh.address, 9n, UNLISTED_FACTORY);
    const s4 = await open(app, shop.base);
    const refused = await settle(app, shop.base, s4.id, await signPayment(smartWalletSigner(fresh, unlisted, { deploy: { factory: UNLISTED_FACTORY, salt: 9n } }), s4.pr));
    expect(refused.body.reason_codes).toEqual(['ERC6492_FACTORY_NOT_ALLOWED']);

    // an EOA still pays as before on the same server
    const s5 = await open(app, shop.base);
    expect((await settle(app, shop.base, s5.id, await signPayment(privateKeyToAccount(generatePrivateKey()), s5.pr))).status).toBe(200);
  });

  it('GIVEN no test chain WHEN a wallet pays with a contract signature THEN CONTRACT_SIGNATURE_UNVERIFIABLE (402), no order; an EOA still pays', async () => {
    const shop = await publishedMerchant(bare);
    const owner = privateKeyToAccount(generatePrivateKey());
    const s = await open(bare, shop.base);
    const r = await settle(bare, shop.base, s.id, await signPayment(smartWalletSigner(owner, await walletAddress(sepolia, owner.address, 3n)), s.pr));
    expect(r.status, r.text).toBe(402);
    expect(r.body.reason_codes).toEqual(['CONTRACT_SIGNATURE_UNVERIFIABLE']);
    expect(r.body.error_human).toMatch(/SVC_RPC_URL_BASE_SEPOLIA/);
    expect(await ordersOf(bare, s.id)).toHaveLength(0);
    const s2 = await open(bare, shop.base);
    expect((await settle(bare, shop.base, s2.id, await signPayment(privateKeyToAccount(generatePrivateKey()), s2.pr))).status).toBe(200);
  });
});
