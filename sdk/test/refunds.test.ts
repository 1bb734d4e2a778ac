import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CompactSign, exportJWK, generateKeyPair } from 'jose';
import { verifyTypedData, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { Refund, RefundReceiptClaims, ReceiptClaims } from '@svc/contract';
import {
  MerchantClient,
  RefundSigningError,
  ReceiptVerificationError,
  SvcValidationError,
  refundTypedData,
  refundTypedDataV4,
  signRefund,
  verifyReceipt,
  verifyRefundReceipt,
} from '../src/index.js';
import { caught } from './helpers.js';

/**
 * The refunds namespace, `signRefund` and the refund receipt (issue 26). The server side of
 * refunds is its own workflow; here the requests go to a local HTTP stub that records them and
 * answers refund objects, so these tests pin the SDK's side: paths, bodies, pagination, signing.
 */

const merchant = privateKeyToAccount(generatePrivateKey());
const buyer = privateKeyToAccount(generatePrivateKey());
const ID = 're_0123456789abcdefghijklmnop';

function refund(over: Partial<Refund> = {}): Refund {
  const now = Math.floor(Date.now() / 1000);
  return {
    id: ID,
    order_id: 'ord_0123456789abcdefghijklmnop',
    merchant_id: 'mrch_0123456789abcdefghijklmn',
    status: 'requires_authorization',
    amount: '4.50',
    amount_base_units: '4500000',
    currency: 'USD',
    reason: 'requested_by_customer',
    metadata: null,
    chain: 'base-sepolia',
    transaction: null,
    receipt: null,
    failure: null,
    authorization_request: {
      typed_data: {
        domain: { name: 'USDC', version: '2', chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' },
        types: { TransferWithAuthorization: [] },
        primaryType: 'TransferWithAuthorization',
        message: { from: merchant.address, to: buyer.address, value: '4500000', validAfter: now - 5, validBefore: now + 600, nonce: `0x${'ab'.repeat(32)}` },
      },
      next: `POST /v1/refunds/${ID}/authorize`,
    },
    livemode: false,
    created_at: new Date().toISOString(),
    updated_at: new Date().toISOString(),
    ...over,
  };
}

type Seen = { method: string; url: string; body: unknown; idempotencyKey: string | undefined; authorization: string | undefined };

/** A local HTTP stub of /v1/refunds: records each request and answers what `answer` says. */
let stub: http.Server;
let baseUrl = '';
const seen: Seen[] = [];
let answer: (req: Seen) => { status: number; body: unknown } = () => ({ status: 200, body: refund() });

beforeAll(async () => {
  stub = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const key = req.headers['idempotency-key'];
    const s: Seen = {
      method: req.method ?? '',
      url: req.url ?? '',
      body: text ? JSON.parse(text) : undefined,
      idempotencyKey: typeof key === 'string' ? key : undefined,
      authorization: req.headers.authorization,
    };
    seen.push(s);
    const out = answer(s);
    res.writeHead(out.status, { 'content-type': 'application/json', 'request-id': 'req_stub' });
    res.end(JSON.stringify(out.body));
  });
  await new Promise<void>((resolve) => stub.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
});
afterAll(async () => {
  stub.closeAllConnections();
  await new Promise<void>((resolve) => stub.close(() => resolve()));
});
beforeEach(() => {
  seen.length = 0;
  answer = () => ({ status: 200, body: refund() });
});

const client = () => new MerchantClient({ apiKey: 'svc_test_stub', baseUrl, maxRetries: 0 });

describe('merchant.refunds', () => {
  it('GIVEN the refunds namespace WHEN create, authorize, retrieve and cancel are called THEN each hits its route with its body, an Idempotency-Key on the POSTs and the key as bearer', async () => {
    const svc = client();
    answer = () => ({ status: 201, body: refund() });
    const created = await svc.refunds.create({ order_id: 'ord_0123456789abcdefghijklmnop', amount: '4.50', reason: 'requested_by_customer', metadata: { ticket: 'T-1' } });
    expect(created.id).toBe(ID);
    answer = () => ({ status: 200, body: refund({ status: 'succeeded', authorization_request: null, transaction: `0x${'cd'.repeat(32)}` }) });
    const done = await svc.refunds.authorize(ID, { signature: '0xsig' }, { idempotencyKey: 'auth-1' });
    expect(done.status).toBe('succeeded');
    expect((await svc.refunds.retrieve(ID)).id).toBe(ID);
    answer = () => ({ status: 200, body: refund({ status: 'canceled', authorization_request: null }) });
    expect((await svc.refunds.cancel(ID)).status).toBe('canceled');

    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      'POST /v1/refunds',
      `POST /v1/refunds/${ID}/authorize`,
      `GET /v1/refunds/${ID}`,
      `POST /v1/refunds/${ID}/cancel`,
    ]);
    expect(seen[0]!.body).toEqual({ order_id: 'ord_0123456789abcdefghijklmnop', amount: '4.50', reason: 'requested_by_customer', metadata: { ticket: 'T-1' } });
    expect(seen[1]!.body).toEqual({ signature: '0xsig' });
    expect(seen[1]!.idempotencyKey).toBe('auth-1');
    expect(seen[0]!.idempotencyKey).toMatch(/.+/);
    expect(seen[3]!.idempotencyKey).toMatch(/.+/);
    expect(seen.every((s) => s.authorization === 'Bearer svc_test_stub')).toBe(true);
  });

  it('GIVEN two pages of refunds WHEN listing one order\'s refunds THEN the iterator follows next_cursor and keeps order_id and limit on every page', async () => {
    answer = (req) => {
      const cursor = new URL(req.url, baseUrl).searchParams.get('cursor');
      return cursor
        ? { status: 200, body: { object: 'list', data: [refund({ id: 're_3333333333333333333333333c' })], has_more: false, next_cursor: null } }
        : { status: 200, body: { object: 'list', data: [refund({ id: 're_1111111111111111111111111a' }), refund({ id: 're_2222222222222222222222222b' })], has_more: true, next_cursor: 'cur_2' } };
    };
    const ids: string[] = [];
    for await (const r of client().refunds.list({ order_id: 'ord_0123456789abcdefghijklmnop', limit: 2 })) ids.push(r.id);
    expect(ids).toEqual(['re_1111111111111111111111111a', 're_2222222222222222222222222b', 're_3333333333333333333333333c']);
    const urls = seen.map((s) => new URL(s.url, baseUrl));
    expect(urls.map((u) => u.pathname)).toEqual(['/v1/refunds', '/v1/refunds']);
    expect(urls.map((u) => Object.fromEntries(u.searchParams))).toEqual([
      { order_id: 'ord_0123456789abcdefghijklmnop', limit: '2' },
      { order_id: 'ord_0123456789abcdefghijklmnop', limit: '2', cursor: 'cur_2' },
    ]);
  });

  it('GIVEN the server refuses a refund WHEN creating THEN the typed error carries the reason code', async () => {
    answer = () => ({ status: 422, body: { reason_codes: ['REFUND_EXCEEDS_REMAINING'], error_human: 'too much' } });
    const err = await caught(client().refunds.create({ order_id: 'ord_0123456789abcdefghijklmnop', amount: '999.00' }));
    expect(err).toBeInstanceOf(SvcValidationError);
    expect((err as SvcValidationError).reasonCodes).toEqual(['REFUND_EXCEEDS_REMAINING']);
  });

  it('GIVEN an empty refund id WHEN retrieving THEN it rejects before any request', async () => {
    await expect(client().refunds.retrieve('')).rejects.toThrow();
    expect(seen).toEqual([]);
  });
});

describe('signRefund', () => {
  it('GIVEN a refund awaiting authorization WHEN the receiving account signs it THEN the signature recovers to message.from over exactly the typed data', async () => {
    const r = refund();
    const signature = await signRefund(merchant, r);
    const td = refundTypedData(r);
    expect(td.message).toMatchObject({ from: merchant.address, to: buyer.address, value: 4_500_000n });
    expect(await verifyTypedData({ ...td, address: merchant.address, signature })).toBe(true);
    // any other value (a larger refund, another payee) does not verify with this signature
    expect(await verifyTypedData({ ...td, message: { ...td.message, value: 4_500_001n }, address: merchant.address, signature })).toBe(false);
    expect(await verifyTypedData({ ...td, message: { ...td.message, to: merchant.address }, address: merchant.address, signature })).toBe(false);
  });

  it('GIVEN the eth_signTypedData_v4 JSON a browser wallet signs WHEN signed as is THEN it is the same signature signRefund makes', async () => {
    const r = refund();
    const v4 = JSON.parse(refundTypedDataV4(r)) as { types: Record<string, unknown>; domain: unknown; message: Record<string, unknown> };
    expect(Object.keys(v4.types)).toEqual(['EIP712Domain', 'TransferWithAuthorization']);
    expect(v4.message).toMatchObject({ value: '4500000', validAfter: expect.stringMatching(/^\d+$/), validBefore: expect.stringMatching(/^\d+$/) });
    const fromV4 = await merchant.signTypedData(v4 as Parameters<typeof merchant.signTypedData>[0]);
    expect(fromV4).toBe(await signRefund(merchant, r));
  });

  it('GIVEN another account or a refund not awaiting authorization WHEN signing THEN RefundSigningError and nothing is signed', async () => {
    await expect(signRefund(buyer, refund())).rejects.toBeInstanceOf(RefundSigningError);
    await expect(signRefund(merchant, refund({ status: 'pending', authorization_request: null }))).rejects.toThrow(/pending, not requires_authorization/);
    expect(() => refundTypedDataV4(refund({ status: 'succeeded', authorization_request: null }))).toThrow(RefundSigningError);
  });

  it('GIVEN a merchant script WHEN it refunds in three lines THEN create, sign and authorize reach the stub with the signature from the receiving key', async () => {
    const svc = client();
    answer = (req) => (req.url.endsWith('/authorize') ? { status: 200, body: refund({ status: 'succeeded', authorization_request: null }) } : { status: 201, body: refund() });
    const r = await svc.refunds.create({ order_id: 'ord_0123456789abcdefghijklmnop' });
    const signature = await signRefund(merchant, r);
    const done = await svc.refunds.authorize(r.id, { signature });
    expect(done.status).toBe('succeeded');
    const sent = (seen[1]!.body as { signature: Hex }).signature;
    expect(await verifyTypedData({ ...refundTypedData(r), address: merchant.address, signature: sent })).toBe(true);
  });
});

describe('refund receipts', () => {
  async function keys() {
    const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const jwk = { ...(await exportJWK(publicKey)), kid: 'rk_1', alg: 'EdDSA', use: 'sig' };
    const sign = (typ: string, claims: object) => new CompactSign(new TextEncoder().encode(JSON.stringify(claims))).setProtectedHeader({ alg: 'EdDSA', typ, kid: 'rk_1' }).sign(privateKey);
    return { jwks: { keys: [jwk] }, sign };
  }
  const claims: RefundReceiptClaims = {
    iss: 'svc-checkout',
    sub: ID,
    iat: 1_800_000_000,
    refundId: ID,
    orderId: 'ord_0123456789abcdefghijklmnop',
    merchantId: 'mrch_0123456789abcdefghijklmn',
    amount: '4.50',
    amountBaseUnits: '4500000',
    currency: 'USD',
    chain: 'base-sepolia',
    transaction: `0x${'cd'.repeat(32)}`,
    livemode: false,
  };

  it('GIVEN a refund receipt signed by the merchant key WHEN verified as a refund THEN the claims come back typed, and expected claims are checked', async () => {
    const { jwks, sign } = await keys();
    const jws = await sign('svc-refund-receipt+jws', claims);
    expect(await verifyReceipt(jws, { jwks, kind: 'refund', expected: { refundId: ID, orderId: claims.orderId } })).toMatchObject(claims);
    expect((await verifyRefundReceipt(jws, { jwks })).transaction).toBe(claims.transaction);
    const mismatch = await caught(verifyRefundReceipt(jws, { jwks, expected: { refundId: 're_other' } }));
    expect((mismatch as ReceiptVerificationError).reason).toBe('RECEIPT_CLAIM_MISMATCH');
    const noTx = await caught(verifyRefundReceipt(await sign('svc-refund-receipt+jws', { ...claims, transaction: undefined }), { jwks }));
    expect((noTx as ReceiptVerificationError).reason).toBe('RECEIPT_CLAIMS_INVALID');
  });

  it('GIVEN a refund receipt and a sale receipt WHEN each is verified as the other kind THEN RECEIPT_TYP_INVALID: neither passes for the other', async () => {
    const { jwks, sign } = await keys();
    const refundJws = await sign('svc-refund-receipt+jws', claims);
    const asSale = await caught(verifyReceipt(refundJws, { jwks }));
    expect(asSale).toBeInstanceOf(ReceiptVerificationError);
    expect((asSale as ReceiptVerificationError).reason).toBe('RECEIPT_TYP_INVALID');
    expect((asSale as Error).message).toMatch(/kind: 'refund'/);
    const sale: Partial<ReceiptClaims> = { iss: 'svc-checkout', sub: 'rcpt_x', orderId: claims.orderId };
    const asRefund = await caught(verifyRefundReceipt(await sign('svc-receipt+jws', sale), { jwks }));
    expect((asRefund as ReceiptVerificationError).reason).toBe('RECEIPT_TYP_INVALID');
  });
});
