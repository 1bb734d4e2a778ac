import { compactVerify, createLocalJWKSet, decodeProtectedHeader, type JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/lib/canonical-json.js';
import { generateEd25519, sha256 } from '../../src/lib/crypto.js';
import { verifyReceipt } from '@svc/sdk';
import { importReceiptKey, inputFingerprint, signReceipt, type ReceiptClaims } from '../../src/modules/gate/receipt.js';

/** Receipts are verified offline by the SDK's verifier, the one agents run. */
const verifyReceiptJws = (jws: string, jwks: { keys: JWK[] }) => verifyReceipt(jws, { jwks });

const seed = generateEd25519();
const key = { ...seed, kid: 'rk_test_1' };
const jwks: { keys: JWK[] } = { keys: [{ kty: 'OKP', crv: 'Ed25519', x: seed.x, kid: key.kid }] };

const claims: ReceiptClaims = {
  iss: 'svc-checkout',
  sub: 'rcpt_01jz0000000000000000000000',
  iat: 1_760_000_000,
  sessionId: 'sess_01jz0000000000000000000000',
  orderId: 'ord_01jz0000000000000000000000',
  merchantId: 'mrch_01jz0000000000000000000000',
  agentId: '6f1c2a52-7d0e-4a8b-9a51-2f4f1d6f3c10',
  decision: 'accept',
  total: { currency: 'USD', subtotal: '25.30', tax: '0.00', total: '25.30' },
  reasonCodes: ['OK'],
  mandateType: 'svc',
  mandateRef: 'mandate-0001',
  policyHash: 'a'.repeat(64),
  policyVersion: 3,
  rail: 'x402',
  settlementRef: `0x${'b'.repeat(64)}`,
  chain: 'base-sepolia',
  livemode: false,
  inputFingerprint: 'c'.repeat(64),
};

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

describe('signReceipt / verifyReceiptJws', () => {
  it('signs a compact JWS with the EdDSA receipt header that plain jose verifies offline', async () => {
    const jws = await signReceipt(key, claims);
    expect(jws.split('.')).toHaveLength(3);
    expect(decodeProtectedHeader(jws)).toEqual({ alg: 'EdDSA', typ: 'svc-receipt+jws', kid: 'rk_test_1' });
    const { payload } = await compactVerify(jws, createLocalJWKSet(jwks), { algorithms: ['EdDSA'] });
    expect(JSON.parse(new TextDecoder().decode(payload))).toEqual(claims);
    expect(await verifyReceiptJws(jws, jwks)).toEqual(claims);
  });

  it('GIVEN the key imported once (as the settle path caches it) THEN the same receipt, verified the same', async () => {
    const imported = await importReceiptKey(key);
    const jws = await signReceipt(imported, claims);
    expect(decodeProtectedHeader(jws).kid).toBe('rk_test_1');
    expect(await verifyReceiptJws(jws, jwks)).toEqual(claims);
  });

  it('GIVEN a tampered payload THEN verification fails', async () => {
    const [h, , s] = (await signReceipt(key, claims)).split('.');
    const tampered = `${h}.${b64({ ...claims, total: { ...claims.total, total: '0.01' } })}.${s}`;
    await expect(verifyReceiptJws(tampered, jwks)).rejects.toThrow(/signature does not verify/);
    await expect(compactVerify(tampered, createLocalJWKSet(jwks))).rejects.toThrow();
  });

  it('GIVEN another key under the same kid THEN verification fails', async () => {
    const other = generateEd25519();
    const jws = await signReceipt({ ...other, kid: key.kid }, claims);
    await expect(verifyReceiptJws(jws, jwks)).rejects.toThrow(/signature does not verify/);
  });

  it('GIVEN a kid absent from the JWKS THEN verification fails', async () => {
    const jws = await signReceipt({ ...key, kid: 'rk_rotated_away' }, claims);
    await expect(verifyReceiptJws(jws, jwks)).rejects.toThrow(/not in the merchant JWKS/);
  });

  it('GIVEN a wrong typ or iss THEN verification fails', async () => {
    const [, p, s] = (await signReceipt(key, claims)).split('.');
    await expect(verifyReceiptJws(`${b64({ alg: 'EdDSA', typ: 'JWT', kid: key.kid })}.${p}.${s}`, jwks)).rejects.toThrow(/typ/);
    const wrongIss = await signReceipt(key, { ...claims, iss: 'someone-else' as 'svc-checkout' });
    await expect(verifyReceiptJws(wrongIss, jwks)).rejects.toThrow(/iss/);
    await expect(verifyReceiptJws('not-a-jws', jwks)).rejects.toThrow(/compact JWS/);
  });
});

describe('inputFingerprint', () => {
  it('is the sha256 hex of the JCS form, independent of key order', () => {
    const a = { total: '25.30', agent: 'x', items: [{ sku: 'A', qty: 2 }] };
    const b = { items: [{ qty: 2, sku: 'A' }], agent: 'x', total: '25.30' };
    expect(inputFingerprint(a)).toMatch(/^[0-9a-f]{64}$/);
    expect(inputFingerprint(a)).toBe(inputFingerprint(b));
    expect(inputFingerprint(a)).toBe(sha256('{"agent":"x","items":[{"qty":2,"sku":"A"}],"total":"25.30"}'));
    expect(canonicalJson(b)).toBe('{"agent":"x","items":[{"qty":2,"sku":"A"}],"total":"25.30"}');
    expect(inputFingerprint({ ...a, total: '25.31' })).not.toBe(inputFingerprint(a));
  });
});
