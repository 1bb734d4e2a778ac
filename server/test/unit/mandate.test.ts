import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CompactSign, exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMandate, type IssuerKeySets, type MandateContext } from '../../src/modules/gate/mandate.js';
import { outboundRules } from '../../src/lib/ssrf.js';

type Served = { url: string; hits: () => number; close: () => Promise<void> };

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Served> {
  let hits = 0;
  const server: Server = createServer((req, res) => {
    hits += 1;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/.well-known/jwks.json`,
    hits: () => hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const serveJwks = (jwks: { keys: JWK[] }) =>
  serve((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(jwks));
  });

const NOW = new Date('2026-01-15T12:00:00Z');
const NOW_SEC = Math.floor(NOW.getTime() / 1000);
const AGENT = '6f1c2a52-7d0e-4a8b-9a51-2f4f1d6f3c10';
const KID = 'issuer-key-1';

let issuerKey: CryptoKey;
let otherKey: CryptoKey;
let issuer: Served;

beforeAll(async () => {
  const kp = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  issuerKey = kp.privateKey;
  otherKey = (await generateKeyPair('EdDSA', { crv: 'Ed25519' })).privateKey;
  issuer = await serveJwks({ keys: [{ ...(await exportJWK(kp.publicKey)), kid: KID, alg: 'EdDSA', use: 'sig' }] });
});
afterAll(async () => issuer?.close());

function claims(over: Record<string, unknown> = {}, auth: Record<string, unknown> = {}) {
  return {
    iss: 'https://wallet.example',
    sub: 'mandate-0001',
    exp: NOW_SEC + 600,
    decision: 'approve',
    agent_id: AGENT,
    authorization: { merchant: 'mrch_01jabc', max_amount: '50.00', currency: 'USD', intent: 'buy coffee beans', ...auth },
    ...over,
  };
}

async function token(payload: unknown, header: Record<string, unknown> = {}, key: CryptoKey = issuerKey): Promise<string> {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  return new CompactSign(new TextEncoder().encode(body))
    .setProtectedHeader({ alg: 'EdDSA', typ: 'svc-mandate+jws', kid: KID, ...header } as { alg: string })
    .sign(key);
}

function ctx(over: Partial<MandateContext> = {}): MandateContext {
  return {
    jwksUrl: issuer.url,
    merchantId: 'mrch_01jabc',
    merchantDomain: 'shop.example.com',
    total: '25.30',
    currency: 'USD',
    agentId: AGENT,
    now: NOW,
    // A test merchant outside production: the local issuers these tests run are on loopback.
    rules: outboundRules({ NODE_ENV: 'test', SVC_ALLOW_PRIVATE_URLS: false }, false),
    ...over,
  };
}

const svc = async (payload: unknown = claims(), c: Partial<MandateContext> = {}, header: Record<string, unknown> = {}, key?: CryptoKey) =>
  verifyMandate({ type: 'svc', token: await token(payload, header, key) }, ctx(c));

describe('verifyMandate: absent and unsupported types', () => {
  it('GIVEN no mandate or type none THEN ok, not present, no ref', async () => {
    const none = { type: 'none', present: false, ok: true, ref: null };
    expect(await verifyMandate(null, ctx())).toEqual(none);
    expect(await verifyMandate(undefined, ctx())).toEqual(none);
    expect(await verifyMandate({ type: 'none' }, ctx())).toEqual(none);
  });
  it('GIVEN acp THEN MANDATE_TYPE_UNSUPPORTED saying why; an ap2 mandate without an SD-JWT token THEN MANDATE_MALFORMED', async () => {
    const acp = await verifyMandate({ type: 'acp', raw: { anything: true } }, ctx());
    expect(acp).toMatchObject({ type: 'acp', present: true, ok: false, code: 'MANDATE_TYPE_UNSUPPORTED', ref: null });
    expect(acp.human).toContain('no crypto payment handler');
    expect(await verifyMandate({ type: 'ap2', raw: { anything: true } }, ctx())).toMatchObject({ type: 'ap2', present: true, ok: false, code: 'MANDATE_MALFORMED', ref: null });
  });
  it('GIVEN a type nobody defined THEN MANDATE_MALFORMED naming the types, before any token is looked at', async () => {
    expect(await verifyMandate({ type: 'gold', token: 'a.b.c' } as never, ctx())).toMatchObject({
      present: true,
      ok: false,
      code: 'MANDATE_MALFORMED',
      human: 'mandate.type must be svc, ap2, acp or none.',
    });
  });
});

describe('verifyMandate: svc', () => {
  it('GIVEN a valid mandate bound to the merchant id THEN ok with ref = sub', async () => {
    expect(await svc()).toEqual({
      type: 'svc',
      present: true,
      ok: true,
      ref: 'mandate-0001',
      issuer: 'https://wallet.example',
      subject: 'mandate-0001',
      intent: 'buy coffee beans',
      maxAmount: '50.00',
    });
  });

  it('accepts the merchant domain (case-insensitive), a total equal to max_amount, and a null intent', async () => {
    const r = await svc(claims({}, { merchant: 'Shop.Example.com', max_amount: '25.3', intent: null }));
    expect(r).toMatchObject({ ok: true, intent: null, maxAmount: '25.3' });
  });

  it('GIVEN a token that is not a compact JWS or has no token THEN MANDATE_MALFORMED', async () => {
    for (const t of [undefined, '', 'abc', 'a.b', '!!!.e30.sig']) {
      expect(await verifyMandate({ type: 'svc', token: t }, ctx()), String(t)).toMatchObject({ ok: false, code: 'MANDATE_MALFORMED' });
    }
    expect(await verifyMandate({ type: 'svc', token: 'a.b' }, ctx())).toMatchObject({ human: 'mandate.token must be a compact JWS (header.payload.signature).' });
    expect(await verifyMandate({ type: 'svc', token: 'a.b.c.d' }, ctx())).toMatchObject({ human: 'mandate.token must be a compact JWS (header.payload.signature).' });
    expect(await verifyMandate({ type: 'svc', token: '!!!.e30.sig' }, ctx())).toMatchObject({ human: 'The svc mandate protected header is not base64url JSON.' });
  });

  it('GIVEN three parts with a good header but a signature that is not base64url THEN MANDATE_MALFORMED: not a valid compact JWS', async () => {
    const [h, p] = (await token(claims())).split('.');
    const r = await verifyMandate({ type: 'svc', token: `${h}.${p}.%%%` }, ctx());
    expect(r).toMatchObject({ ok: false, code: 'MANDATE_MALFORMED', human: expect.stringContaining('not a valid compact JWS') });
  });

  it('GIVEN header alg other than EdDSA, typ other than svc-mandate+jws, or no kid THEN MANDATE_MALFORMED', async () => {
    const hdr = (h: object) => Buffer.from(JSON.stringify(h)).toString('base64url');
    const body = Buffer.from(JSON.stringify(claims())).toString('base64url');
    const forged = (h: object) => `${hdr(h)}.${body}.${'A'.repeat(86)}`;
    expect(await verifyMandate({ type: 'svc', token: forged({ alg: 'ES256', typ: 'svc-mandate+jws', kid: KID }) }, ctx())).toMatchObject({
      code: 'MANDATE_MALFORMED',
    });
    expect(await verifyMandate({ type: 'svc', token: forged({ alg: 'none', typ: 'svc-mandate+jws', kid: KID }) }, ctx())).toMatchObject({
      code: 'MANDATE_MALFORMED',
    });
    expect(await svc(claims(), {}, { typ: 'JWT' })).toMatchObject({ code: 'MANDATE_MALFORMED', human: 'The svc mandate header typ must be svc-mandate+jws, got JWT.' });
    expect(await svc(claims(), {}, { kid: undefined })).toMatchObject({ code: 'MANDATE_MALFORMED', human: 'The svc mandate header must carry the kid of the issuer key.' });
    expect(await verifyMandate({ type: 'svc', token: forged({ alg: 'ES256', typ: 'svc-mandate+jws', kid: KID }) }, ctx())).toMatchObject({ human: 'The svc mandate header alg must be EdDSA, got ES256.' });
  });

  it('GIVEN the merchant has no trusted_svc_jwks_url THEN MANDATE_INVALID_SIGNATURE saying why', async () => {
    const r = await svc(claims(), { jwksUrl: null });
    expect(r).toMatchObject({ ok: false, code: 'MANDATE_INVALID_SIGNATURE' });
    expect(r.human).toContain('trusted_svc_jwks_url');
  });

  it('GIVEN a signature by another key under the trusted kid THEN MANDATE_INVALID_SIGNATURE', async () => {
    expect(await svc(claims(), {}, {}, otherKey)).toMatchObject({
      ok: false,
      code: 'MANDATE_INVALID_SIGNATURE',
      human: 'The svc mandate signature does not verify against the issuer key named by kid.',
      ref: null,
    });
  });

  it('GIVEN a payload changed after signing THEN MANDATE_INVALID_SIGNATURE', async () => {
    const [h, , s] = (await token(claims())).split('.');
    const tampered = Buffer.from(JSON.stringify(claims({}, { max_amount: '5000.00' }))).toString('base64url');
    expect(await verifyMandate({ type: 'svc', token: `${h}.${tampered}.${s}` }, ctx())).toMatchObject({ code: 'MANDATE_INVALID_SIGNATURE' });
  });

  it('GIVEN a kid the issuer JWKS does not have THEN MANDATE_INVALID_SIGNATURE', async () => {
    expect(await svc(claims(), {}, { kid: 'unknown-kid' })).toMatchObject({ code: 'MANDATE_INVALID_SIGNATURE', human: 'The trusted issuer JWKS has no single EdDSA key with the mandate kid.' });
  });

  it('GIVEN missing or mistyped claims THEN MANDATE_MALFORMED', async () => {
    const { authorization: _omit, ...noAuth } = claims();
    const { intent: _i, ...noIntent } = claims().authorization;
    // each with the part of error_human that names what is wrong
    const bad: Array<[unknown, string]> = [
      ['not json', 'the payload is not JSON'],
      ['[1,2]', 'the payload is not a JSON object'],
      ['null', 'the payload is not a JSON object'],
      [claims({ iss: undefined }), 'claim iss must be a non-empty string'],
      [claims({ sub: '' }), 'claim sub must be a non-empty string'],
      [claims({ exp: String(NOW_SEC + 600) }), 'claim exp must be a NumericDate (unix seconds)'],
      // JSON's 1e999 parses to Infinity: a mandate that would never expire
      [JSON.stringify(claims()).replace(/"exp":\d+/, '"exp":1e999'), 'claim exp must be a NumericDate (unix seconds)'],
      [claims({ decision: true }), 'claim decision must be a non-empty string'],
      [claims({ agent_id: 42 }), 'claim agent_id must be a non-empty string'],
      [noAuth, 'claim authorization must be an object'],
      [claims({ authorization: 'x' }), 'claim authorization must be an object'],
      [claims({}, { merchant: undefined }), 'authorization.merchant must be the merchant id or domain'],
      [claims({}, { max_amount: 50 }), 'authorization.max_amount must be a decimal string like "25.00"'],
      [claims({}, { max_amount: '-1.00' }), 'authorization.max_amount must be a decimal string like "25.00"'],
      [claims({}, { max_amount: '25.00x' }), 'authorization.max_amount must be a decimal string like "25.00"'],
      [claims({}, { max_amount: 'x25.00' }), 'authorization.max_amount must be a decimal string like "25.00"'],
      [claims({}, { currency: '' }), 'authorization.currency must be a currency code'],
      [{ ...claims(), authorization: noIntent }, 'authorization.intent must be a string or null'],
      [claims({}, { intent: 7 }), 'authorization.intent must be a string or null'],
    ];
    for (const [payload, why] of bad) {
      expect(await svc(payload), JSON.stringify(payload)).toMatchObject({ ok: false, code: 'MANDATE_MALFORMED', human: `The svc mandate claims are invalid: ${why}.` });
    }
  });

  it('GIVEN exp at or before now THEN MANDATE_EXPIRED', async () => {
    expect(await svc(claims({ exp: NOW_SEC - 1 }))).toMatchObject({ code: 'MANDATE_EXPIRED', human: `The svc mandate expired at ${NOW_SEC - 1} (now ${NOW_SEC}).` });
    expect(await svc(claims({ exp: NOW_SEC }))).toMatchObject({ code: 'MANDATE_EXPIRED' });
    expect(await svc(claims({ exp: NOW_SEC + 1 }))).toMatchObject({ ok: true });
  });

  it('GIVEN decision other than approve THEN MANDATE_NOT_APPROVED', async () => {
    expect(await svc(claims({ decision: 'deny' }))).toMatchObject({ code: 'MANDATE_NOT_APPROVED', human: 'The svc mandate decision is "deny", not "approve".' });
  });

  it('GIVEN a mandate for another merchant THEN MANDATE_MERCHANT_MISMATCH', async () => {
    expect(await svc(claims({}, { merchant: 'mrch_other' }))).toMatchObject({
      code: 'MANDATE_MERCHANT_MISMATCH',
      human: 'The svc mandate authorizes merchant "mrch_other", not mrch_01jabc (shop.example.com).',
    });
    expect(await svc(claims({}, { merchant: 'evil.example.com' }))).toMatchObject({ code: 'MANDATE_MERCHANT_MISMATCH' });
  });

  it('GIVEN a mandate issued to another agent THEN MANDATE_AGENT_MISMATCH', async () => {
    const r = await svc(claims({ agent_id: '00000000-0000-4000-8000-000000000000' }));
    expect(r).toMatchObject({ ok: false, code: 'MANDATE_AGENT_MISMATCH', human: `The svc mandate was issued to agent 00000000-0000-4000-8000-000000000000, not ${AGENT}.`, ref: null });
    expect(await svc(claims({ agent_id: AGENT.toUpperCase() }))).toMatchObject({ ok: true });
  });

  it('GIVEN max_amount below the total or another currency THEN MANDATE_AMOUNT_INSUFFICIENT', async () => {
    expect(await svc(claims({}, { max_amount: '25.29' }))).toMatchObject({
      code: 'MANDATE_AMOUNT_INSUFFICIENT',
      human: 'The svc mandate allows at most 25.29 USD; the cart total is 25.30.',
    });
    expect(await svc(claims({}, { max_amount: '9.99' }), { total: '10.00' })).toMatchObject({ code: 'MANDATE_AMOUNT_INSUFFICIENT' });
    expect(await svc(claims({}, { currency: 'EUR' }))).toMatchObject({ code: 'MANDATE_AMOUNT_INSUFFICIENT' });
    expect(await svc(claims({}, { currency: 'usd' }))).toMatchObject({ ok: true });
  });
});

describe('verifyMandate: issuer JWKS fetching', () => {
  it('fetches the issuer JWKS once and serves later verifications from the cache', async () => {
    const kp = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const own = await serveJwks({ keys: [{ ...(await exportJWK(kp.publicKey)), kid: KID }] });
    try {
      // The process's key sets (services.caches.issuerKeys in the server).
      const issuerKeys: IssuerKeySets = new Map();
      for (let i = 0; i < 3; i++) {
        const r = await svc(claims({ sub: `m-${i}` }), { jwksUrl: own.url, issuerKeys }, {}, kp.privateKey);
        expect(r).toMatchObject({ ok: true, ref: `m-${i}` });
      }
      expect(own.hits()).toBe(1);
    } finally {
      await own.close();
    }
  });

  it('GIVEN an issuer that never answers THEN MANDATE_ISSUER_UNAVAILABLE after the timeout', async () => {
    const hanging = await serve(() => {
      /* never responds */
    });
    try {
      const r = await svc(claims(), { jwksUrl: hanging.url, timeoutMs: 200 });
      expect(r).toMatchObject({ ok: false, code: 'MANDATE_ISSUER_UNAVAILABLE' });
      // One generic text for every fetch failure (decisions.md: no port probing through error texts).
      expect(r.human).toBe('The trusted issuer JWKS could not be fetched; retry shortly.');
      expect(hanging.hits()).toBe(1);
    } finally {
      await hanging.close();
    }
  });

  it('GIVEN an issuer answering 500 or non-JSON THEN MANDATE_ISSUER_UNAVAILABLE', async () => {
    const failing = await serve((_req, res) => {
      res.writeHead(500);
      res.end('down');
    });
    const garbage = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{not json');
    });
    const notASet = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"keys": "nope"}');
    });
    try {
      for (const s of [failing, garbage, notASet]) {
        expect(await svc(claims(), { jwksUrl: s.url, timeoutMs: 300 })).toMatchObject({ ok: false, code: 'MANDATE_ISSUER_UNAVAILABLE' });
      }
    } finally {
      await Promise.all([failing.close(), garbage.close(), notASet.close()]);
    }
  });

  it('GIVEN two issuers in one process WHEN each verifies its own mandates THEN each by its own keys: one cached set never answers for another URL', async () => {
    const kp = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const second = await serveJwks({ keys: [{ ...(await exportJWK(kp.publicKey)), kid: KID }] });
    try {
      const issuerKeys: IssuerKeySets = new Map();
      expect(await svc(claims(), { issuerKeys })).toMatchObject({ ok: true });
      expect(await svc(claims(), { jwksUrl: second.url, issuerKeys }, {}, kp.privateKey)).toMatchObject({ ok: true });
      // the first issuer's mandate is not valid where the merchant trusts only the second
      expect(await svc(claims(), { jwksUrl: second.url, issuerKeys })).toMatchObject({ ok: false, code: 'MANDATE_INVALID_SIGNATURE' });
      expect(await svc(claims(), { issuerKeys }, {}, kp.privateKey)).toMatchObject({ ok: false, code: 'MANDATE_INVALID_SIGNATURE' });
    } finally {
      await second.close();
    }
  });

  it('GIVEN an issuer answering 404 with a key set in the body THEN MANDATE_ISSUER_UNAVAILABLE: only a 200 is a key set', async () => {
    const jwks = JSON.stringify({ keys: [{ ...(await exportJWK((await generateKeyPair('EdDSA', { crv: 'Ed25519' })).publicKey)), kid: KID }] });
    const notFound = await serve((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(jwks);
    });
    try {
      expect(await svc(claims(), { jwksUrl: notFound.url })).toMatchObject({ ok: false, code: 'MANDATE_ISSUER_UNAVAILABLE' });
    } finally {
      await notFound.close();
    }
  });

  it('GIVEN a live merchant whose issuer URL is plain http on loopback THEN MANDATE_ISSUER_UNAVAILABLE without a request', async () => {
    const hitsBefore = issuer.hits();
    const r = await svc(claims(), { rules: outboundRules({ NODE_ENV: 'test', SVC_ALLOW_PRIVATE_URLS: false }, true) });
    expect(r).toMatchObject({ ok: false, code: 'MANDATE_ISSUER_UNAVAILABLE' });
    expect(issuer.hits()).toBe(hitsBefore);
  });

  it('GIVEN an issuer that refuses connections THEN MANDATE_ISSUER_UNAVAILABLE', async () => {
    const gone = await serve(() => undefined);
    await gone.close();
    expect(await svc(claims(), { jwksUrl: gone.url, timeoutMs: 300 })).toMatchObject({ ok: false, code: 'MANDATE_ISSUER_UNAVAILABLE' });
  });
});
