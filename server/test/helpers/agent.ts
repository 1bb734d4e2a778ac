import { randomBytes, randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Address, Hex } from 'viem';
import { TRANSFER_WITH_AUTHORIZATION_TYPES, type Refund } from '@svc/contract';
import { merchantBody, type TestApp, type TestKey } from './harness.js';

export const USDC_SEPOLIA = '0x036CbD53842c5426634e7929541eC2318f3dCF7e' as const;

export const TRANSFER_TYPES = TRANSFER_WITH_AUTHORIZATION_TYPES;

export function newBuyer(): PrivateKeyAccount {
  return privateKeyToAccount(generatePrivateKey());
}

/** Signs the EIP-3009 authorization for a session's payment requirement, as an agent would. */
export async function signPayment(
  account: PrivateKeyAccount,
  pr: { payTo: string; amountBaseUnits: string; chainId: number; verifyingContract: string; eip712Domain: { name: string; version: string } },
  overrides: Partial<{ to: string; value: string; validAfter: number; validBefore: number; nonce: Hex; domainName: string }> = {},
) {
  const now = Math.floor(Date.now() / 1000);
  const authorization = {
    from: account.address,
    to: overrides.to ?? pr.payTo,
    value: overrides.value ?? pr.amountBaseUnits,
    validAfter: overrides.validAfter ?? now - 600,
    validBefore: overrides.validBefore ?? now + 300,
    nonce: overrides.nonce ?? (`0x${randomBytes(32).toString('hex')}` as Hex),
  };
  const signature = await account.signTypedData({
    domain: { name: overrides.domainName ?? pr.eip712Domain.name, version: pr.eip712Domain.version, chainId: pr.chainId, verifyingContract: pr.verifyingContract as Hex },
    types: TRANSFER_TYPES,
    primaryType: 'TransferWithAuthorization',
    message: {
      from: authorization.from,
      to: authorization.to as Hex,
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
      nonce: authorization.nonce,
    },
  });
  return { payment: { scheme: 'x402-exact', authorization, signature } };
}

/** A published test merchant with products; returns its id, slug and the key. */
export async function publishedMerchant(
  /** A TestApp, or anything that makes keys and requests the same way (the benchmark's client). */
  app: Pick<TestApp, 'key' | 'request'>,
  opts: { key?: TestKey; policy?: Record<string, unknown>; products?: Array<{ sku: string; amount: string; currency?: string; available?: boolean }>; merchant?: Record<string, unknown> } = {},
) {
  const key = opts.key ?? (await app.key('test'));
  const m = await app.request('POST', '/v1/merchants', { key, body: merchantBody(opts.merchant) });
  if (m.status !== 201) throw new Error(`merchant: ${m.status} ${m.text}`);
  const q = `?merchant_id=${m.body.id}`;
  for (const p of opts.products ?? [{ sku: 'coffee', amount: '4.50' }, { sku: 'beans', amount: '12.00' }]) {
    const r = await app.request('POST', `/v1/catalog${q}`, {
      key,
      body: { sku: p.sku, name: `Item ${p.sku}`, price: { amount: p.amount, currency: p.currency ?? 'USD' }, available: p.available ?? true, category: 'shop' },
    });
    if (r.status !== 201) throw new Error(`product: ${r.status} ${r.text}`);
  }
  if (opts.policy) {
    const r = await app.request('PUT', `/v1/policy${q}`, { key, body: { body: opts.policy } });
    if (r.status !== 201) throw new Error(`policy: ${r.status} ${r.text}`);
  }
  const pub = await app.request('POST', `/v1/publish${q}`, { key });
  if (pub.status !== 200) throw new Error(`publish: ${pub.status} ${pub.text}`);
  return { key, merchant: m.body as { id: string; slug: string; domain: string; receipt_kid: string; receiving: any }, base: `/m/${m.body.id}` };
}

export const agentId = () => randomUUID();

/**
 * A live merchant on base selling one 0.75 espresso, with no policy standing between a paying
 * agent and the chain, paid to a fresh address (its balance starts at zero).
 */
export async function publishedLiveEspresso(app: Pick<TestApp, 'key' | 'request'>, key: TestKey) {
  const payTo: Address = privateKeyToAccount(generatePrivateKey()).address;
  const shop = await publishedMerchant(app, {
    key,
    merchant: { receiving: { x402: { chain: 'base', address: payTo } } },
    products: [{ sku: 'espresso', amount: '0.75' }],
    policy: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null },
  });
  return { shop, payTo };
}

/**
 * Signs a refund's authorization_request with a viem account, as a merchant script would, from
 * the typed data as answered (no check of the signer: the tests also sign with the wrong one).
 */
export async function signRefund(account: PrivateKeyAccount, refund: Refund): Promise<Hex> {
  const td = refund.authorization_request!.typed_data;
  return account.signTypedData({
    domain: { ...td.domain, verifyingContract: td.domain.verifyingContract as Hex },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization',
    message: {
      from: td.message.from as Hex,
      to: td.message.to as Hex,
      value: BigInt(td.message.value),
      validAfter: BigInt(td.message.validAfter),
      validBefore: BigInt(td.message.validBefore),
      nonce: td.message.nonce as Hex,
    },
  });
}
