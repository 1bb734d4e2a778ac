import { createHash } from 'node:crypto';
import { SDJwt, SDJwtInstance } from '@sd-jwt/core';
import { digest } from '@sd-jwt/crypto-nodejs';
import { createHashMapping, unpack } from '@sd-jwt/decode';
import { compactVerify, decodeProtectedHeader, errors as joseErrors, importJWK, type CryptoKey, type JWK } from 'jose';
import type { ReasonCode } from '@svc/contract';
import { compareDecimal, currencyScale, decimalFromPolicyNumber, toBaseUnits } from '../../lib/money.js';
import { unixSeconds } from '../../lib/time.js';

/**
 * AP2 v0.2 mandates (google-agentic-commerce/AP2 docs/ap2/specification.md, checkout_mandate.md,
 * payment_mandate.md, code/sdk/schemas/ap2/*.json): SD-JWT credentials verified with @sd-jwt/core,
 * then bound to this checkout (docs/decisions.md "AP2 mandates"). Pure apart from the issuer key
 * lookup the caller passes in (mandate.ts fetches and caches the trusted issuers' JWKS).
 */

/** The four AP2 v0.2 mandate types, matched exactly with their version suffix (specification.md "Mandate Versioning"). */
export const AP2_VCT = {
  checkout: 'mandate.checkout.1',
  checkoutOpen: 'mandate.checkout.open.1',
  payment: 'mandate.payment.1',
  paymentOpen: 'mandate.payment.open.1',
} as const;
const OPEN_VCTS = new Set<string>([AP2_VCT.checkoutOpen, AP2_VCT.paymentOpen]);
/** ECDSA as AP2 asks, and EdDSA; never `none` or an HMAC. */
export const AP2_ALGS = ['ES256', 'ES384', 'ES512', 'EdDSA'];
/** A key-binding JWT older than this (or more than the skew ahead) is stale: the session TTL's default. */
export const AP2_KB_MAX_AGE_SECONDS = 900;
const KB_SKEW_SECONDS = 60;
/** An agent-chosen nonce must carry at least this many characters to be fresh (a session id does). */
export const AP2_KB_MIN_NONCE = 16;

export type Ap2Checkout = {
  merchantId: string;
  merchantDomain: string | null;
  currency: string;
  total: string;
  lines: ReadonlyArray<{ sku: string; qty: number; unitPrice: string }>;
  now: Date;
};

export type Ap2Failure = { ok: false; code: ReasonCode; human: string };
export type Ap2Verified = {
  ok: true;
  vct: string;
  /** Single-use reference: `ap2:` + base64url SHA-256 of the issuer-signed JWT (the same mandate whatever disclosures it is shown with). */
  ref: string;
  issuer: string;
  maxAmount?: string;
};
/** The issuer key for a protected header: the key, `unknown` when no trusted issuer publishes its kid, or `unavailable`. */
export type Ap2KeyLookup = (header: { alg: string; kid: string }) => Promise<{ key: CryptoKey | Uint8Array; issuer: string } | 'unknown' | 'unavailable'>;

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const fail = (code: ReasonCode, human: string): Ap2Failure => ({ ok: false, code, human });
const sha256url = (s: string) => createHash('sha256').update(s).digest('base64url');

/** Whether a JWS (`data.signature`) verifies under `key`; the library calls it for the issuer JWT and the KB-JWT. */
async function signatureVerifies(data: string, signature: string, key: CryptoKey | Uint8Array, algorithms: string[]): Promise<boolean> {
  try {
    await compactVerify(`${data}.${signature}`, key, { algorithms });
    return true;
  } catch (err) {
    if (err instanceof joseErrors.JWSSignatureVerificationFailed || err instanceof joseErrors.JOSEAlgNotAllowed || err instanceof joseErrors.JWSInvalid) return false;
    throw err;
  }
}

/** Whether a mandate's merchant object (`{id, name, website?}`) names this merchant: its id or its verified domain. */
function namesMerchant(m: unknown, c: Ap2Checkout): boolean {
  if (!isObj(m) || !nonEmpty(m.id)) return false;
  return m.id === c.merchantId || (c.merchantDomain !== null && m.id.toLowerCase() === c.merchantDomain.toLowerCase());
}
const merchantNamed = (c: Ap2Checkout) => (c.merchantDomain ? `${c.merchantId} (${c.merchantDomain})` : `${c.merchantId} (its domain is not verified)`);

/** An allow-list constraint (`payment.allowed_payees`, `checkout.allowed_merchants`): it must list this merchant. */
function allowsMerchant(k: Record<string, unknown>, c: Ap2Checkout): Ap2Failure | null {
  if (Array.isArray(k.allowed) && k.allowed.some((m) => namesMerchant(m, c))) return null;
  return fail('MANDATE_MERCHANT_MISMATCH', `The AP2 mandate's ${String(k.type)} does not list ${merchantNamed(c)}.`);
}

/** The cart total in the currency's minor units (AP2 amounts are integers in ISO 4217 minor units). */
const totalMinor = (c: Ap2Checkout) => BigInt(toBaseUnits(c.total, currencyScale(c.currency)).baseUnits);
const minorOf = (v: unknown): bigint | null => (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? BigInt(v) : null);

/** A closed Payment Mandate, or the pre-set payee/amount of an open one: payee, currency and exact amount. */
function checkPayment(claims: Record<string, unknown>, c: Ap2Checkout, required: boolean): Ap2Failure | null {
  if (required || claims.payee !== undefined) {
    if (!namesMerchant(claims.payee, c)) return fail('MANDATE_MERCHANT_MISMATCH', `The AP2 payment mandate pays ${JSON.stringify(claims.payee ?? null)}, not ${merchantNamed(c)}.`);
  }
  if (required || claims.payment_amount !== undefined) {
    const a = claims.payment_amount;
    if (!isObj(a) || !nonEmpty(a.currency) || minorOf(a.amount) === null) return fail('MANDATE_MALFORMED', 'payment_amount must be {amount: integer minor units, currency}.');
    if (a.currency.toUpperCase() !== c.currency.toUpperCase()) return fail('MANDATE_CURRENCY_MISMATCH', `The AP2 mandate pays in ${a.currency}; the cart is in ${c.currency}.`);
    if (minorOf(a.amount) !== totalMinor(c)) {
      return fail('MANDATE_AMOUNT_OUT_OF_RANGE', `The AP2 payment mandate pays ${String(a.amount)} minor units of ${a.currency}; the cart total is ${c.total} (${totalMinor(c)}).`);
    }
  }
  return null;
}

/** An open Payment Mandate's constraints (open_payment_mandate.json `$defs`), each against this checkout. */
function checkPaymentConstraint(k: Record<string, unknown>, c: Ap2Checkout): Ap2Failure | null {
  const total = totalMinor(c);
  switch (k.type) {
    case 'payment.allowed_payees':
      return allowsMerchant(k, c);
    case 'payment.amount_range': {
      const max = minorOf(k.max);
      const min = k.min === undefined ? 0n : minorOf(k.min);
      if (!nonEmpty(k.currency) || max === null || min === null) return fail('MANDATE_MALFORMED', 'payment.amount_range needs currency, an integer max and an optional integer min (minor units).');
      if (k.currency.toUpperCase() !== c.currency.toUpperCase()) return fail('MANDATE_CURRENCY_MISMATCH', `The AP2 amount range is in ${k.currency}; the cart is in ${c.currency}.`);
      if (total < min || total > max) return fail('MANDATE_AMOUNT_OUT_OF_RANGE', `The cart total ${c.total} (${total} minor units) is outside the AP2 amount range ${min}..${max}.`);
      return null;
    }
    case 'payment.budget': {
      // Major units (AP2's reference evaluator multiplies max by 100); each AP2 mandate pays one order here, so past spend is 0.
      if (!nonEmpty(k.currency) || typeof k.max !== 'number' || !Number.isFinite(k.max) || k.max < 0) return fail('MANDATE_MALFORMED', 'payment.budget needs currency and a numeric max.');
      if (k.currency.toUpperCase() !== c.currency.toUpperCase()) return fail('MANDATE_CURRENCY_MISMATCH', `The AP2 budget is in ${k.currency}; the cart is in ${c.currency}.`);
      const max = decimalFromPolicyNumber(k.max);
      if (compareDecimal(c.total, max) > 0) return fail('MANDATE_BUDGET_EXCEEDED', `The cart total ${c.total} ${c.currency} exceeds the AP2 budget of ${max} ${k.currency}.`);
      return null;
    }
    case 'payment.execution_date': {
      const now = c.now.getTime();
      const before = nonEmpty(k.not_before) ? Date.parse(k.not_before) : -Infinity;
      const after = nonEmpty(k.not_after) ? Date.parse(k.not_after) : Infinity;
      if (Number.isNaN(before) || Number.isNaN(after)) return fail('MANDATE_MALFORMED', 'payment.execution_date bounds must be ISO 8601 dates.');
      if (now < before || now > after) return fail('MANDATE_EXPIRED', `The AP2 mandate allows payment between ${String(k.not_before ?? '-')} and ${String(k.not_after ?? '-')} only.`);
      return null;
    }
    // Links the payment to an open checkout mandate the merchant does not receive with it; the KB-JWT binds this presentation.
    case 'payment.reference':
    // Recurrence only widens use: every AP2 mandate pays a single order here (single-use).
    case 'payment.agent_recurrence':
      return null;
    default:
      return fail('MANDATE_CONSTRAINT_UNSUPPORTED', `The AP2 constraint ${JSON.stringify(k.type ?? null)} cannot be evaluated by this gate (payment instruments and PISPs are the credential provider's).`);
  }
}

/** An open Checkout Mandate's constraints: the merchant allowed, and every cart line among the acceptable items within its quantity. */
function checkCheckoutConstraint(k: Record<string, unknown>, c: Ap2Checkout): Ap2Failure | null {
  switch (k.type) {
    case 'checkout.allowed_merchants':
      return allowsMerchant(k, c);
    case 'checkout.line_items': {
      if (!Array.isArray(k.items) || k.items.length === 0) return fail('MANDATE_MALFORMED', 'checkout.line_items needs a non-empty items array.');
      for (const line of c.lines) {
        const req = k.items.find((r) => isObj(r) && Array.isArray(r.acceptable_items) && r.acceptable_items.some((i) => isObj(i) && i.id === line.sku));
        if (!isObj(req)) return fail('MANDATE_CART_MISMATCH', `The cart line ${line.sku} is not among the AP2 mandate's acceptable items.`);
        if (typeof req.quantity !== 'number' || line.qty > req.quantity) {
          return fail('MANDATE_CART_MISMATCH', `The cart has ${line.qty} of ${line.sku}; the AP2 mandate allows ${String(req.quantity)}.`);
        }
      }
      return null;
    }
    default:
      return fail('MANDATE_CONSTRAINT_UNSUPPORTED', `The AP2 constraint ${JSON.stringify(k.type ?? null)} cannot be evaluated by this gate.`);
  }
}

/**
 * A closed Checkout Mandate: `checkout_hash` is the hash of `checkout_jwt`, whose payload (a UCP
 * checkout) names this merchant as `iss` and holds exactly this session's lines and total.
 */
function checkClosedCheckout(claims: Record<string, unknown>, c: Ap2Checkout): Ap2Failure | null {
  const jwt = claims.checkout_jwt;
  if (!nonEmpty(jwt) || !nonEmpty(claims.checkout_hash)) return fail('MANDATE_MALFORMED', 'A mandate.checkout.1 needs checkout_jwt (disclosed) and checkout_hash.');
  if (sha256url(jwt) !== claims.checkout_hash) return fail('MANDATE_CART_MISMATCH', 'checkout_hash is not the SHA-256 of the disclosed checkout_jwt.');
  let checkout: unknown;
  try {
    checkout = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8'));
  } catch {
    return fail('MANDATE_MALFORMED', 'checkout_jwt is not a JWT with a JSON payload.');
  }
  if (!isObj(checkout) || !Array.isArray(checkout.line_items)) return fail('MANDATE_MALFORMED', 'The checkout_jwt payload must be a checkout with line_items.');
  if (!namesMerchant({ id: checkout.iss }, c)) return fail('MANDATE_MERCHANT_MISMATCH', `The AP2 checkout was issued by ${JSON.stringify(checkout.iss ?? null)}, not ${merchantNamed(c)}.`);
  if (nonEmpty(checkout.currency) && checkout.currency.toUpperCase() !== c.currency.toUpperCase()) {
    return fail('MANDATE_CURRENCY_MISMATCH', `The AP2 checkout is in ${checkout.currency}; the cart is in ${c.currency}.`);
  }
  const scale = currencyScale(c.currency);
  const want = new Map(c.lines.map((l) => [l.sku, { qty: l.qty, price: BigInt(toBaseUnits(l.unitPrice, scale).baseUnits) }]));
  const got = checkout.line_items.map((li) => (isObj(li) && isObj(li.item) ? { sku: li.item.id, qty: li.quantity, price: minorOf(li.item.price) } : null));
  const exact = got.length === want.size && got.every((g) => g !== null && typeof g.sku === 'string' && want.get(g.sku)?.qty === g.qty && want.get(g.sku)?.price === g.price);
  if (!exact) return fail('MANDATE_CART_MISMATCH', 'The AP2 checkout mandate approved other items, quantities or prices than this cart.');
  const total = Array.isArray(checkout.totals) ? checkout.totals.find((t) => isObj(t) && t.type === 'total') : undefined;
  if (!isObj(total) || minorOf(total.amount) !== totalMinor(c)) return fail('MANDATE_CART_MISMATCH', `The AP2 checkout mandate approved another total than ${c.total} ${c.currency}.`);
  return null;
}

/** The constraints of the mandate type against this checkout: the first that fails, or null. */
function checkConstraints(vct: string, claims: Record<string, unknown>, c: Ap2Checkout): Ap2Failure | null {
  if (vct === AP2_VCT.checkout) return checkClosedCheckout(claims, c);
  if (vct === AP2_VCT.payment) return checkPayment(claims, c, true);
  if (!Array.isArray(claims.constraints) || !claims.constraints.every(isObj)) return fail('MANDATE_MALFORMED', `A ${vct} needs a constraints array of objects.`);
  if (vct === AP2_VCT.paymentOpen) {
    const preset = checkPayment(claims, c, false);
    if (preset) return preset;
  }
  const check = vct === AP2_VCT.paymentOpen ? checkPaymentConstraint : checkCheckoutConstraint;
  for (const k of claims.constraints as Record<string, unknown>[]) {
    const failed = check(k, c);
    if (failed) return failed;
  }
  return null;
}

/**
 * The key-binding JWT (RFC 9901 section 4.3, checked by @sd-jwt/core's KBJwt): typ kb+jwt, signed
 * by the `cnf.jwk` key, `sd_hash` over this presentation, `aud` this merchant, a fresh `iat`, and a
 * nonce of at least 16 characters (the session id, or one the agent drew for this presentation).
 */
async function checkKeyBinding(token: string, sdjwt: SDJwt, claims: Record<string, unknown>, c: Ap2Checkout): Promise<Ap2Failure | null> {
  const kb = sdjwt.kbJwt;
  if (!kb) return fail('MANDATE_KEY_BINDING_INVALID', 'The AP2 mandate binds a holder key (cnf) but no key-binding JWT follows it: present it with one (aud the merchant, a nonce).');
  const cnf = claims.cnf;
  if (!isObj(cnf) || !isObj(cnf.jwk)) return fail('MANDATE_MALFORMED', 'cnf must carry the holder key as cnf.jwk.');
  let holder: CryptoKey | Uint8Array;
  try {
    holder = await importJWK(cnf.jwk as JWK, typeof kb.header?.alg === 'string' ? kb.header.alg : undefined);
  } catch {
    return fail('MANDATE_KEY_BINDING_INVALID', 'cnf.jwk is not a key the key-binding JWT alg can use.');
  }
  const nonce = kb.payload?.nonce;
  try {
    await kb.verifyKB({ verifier: (data, sig) => signatureVerifies(data, sig, holder, AP2_ALGS), payload: claims, nonce: typeof nonce === 'string' ? nonce : '' });
  } catch (err) {
    return fail('MANDATE_KEY_BINDING_INVALID', `The AP2 key-binding JWT does not verify under cnf.jwk (${(err as Error).message}).`);
  }
  const p = kb.payload!;
  if (p.sd_hash !== sha256url(token.slice(0, token.lastIndexOf('~') + 1))) return fail('MANDATE_KEY_BINDING_INVALID', 'The key-binding JWT sd_hash is not the hash of this presentation.');
  if (!namesMerchant({ id: p.aud }, c)) return fail('MANDATE_KEY_BINDING_INVALID', `The key-binding JWT is for audience ${JSON.stringify(p.aud)}, not ${merchantNamed(c)}.`);
  if (typeof nonce !== 'string' || nonce.length < AP2_KB_MIN_NONCE) return fail('MANDATE_KEY_BINDING_INVALID', `The key-binding JWT nonce must be at least ${AP2_KB_MIN_NONCE} characters.`);
  const now = unixSeconds(c.now);
  if (typeof p.iat !== 'number' || p.iat > now + KB_SKEW_SECONDS || p.iat < now - AP2_KB_MAX_AGE_SECONDS) {
    return fail('MANDATE_KEY_BINDING_INVALID', `The key-binding JWT iat ${String(p.iat)} is not within ${AP2_KB_MAX_AGE_SECONDS} s of now (${now}).`);
  }
  return null;
}

/** Whether a token looks like an SD-JWT presentation, and its issuer JWT's protected header if so. */
export function ap2Header(token: unknown): { alg: string; kid: string } | null {
  if (typeof token !== 'string' || !token.includes('~')) return null;
  try {
    const h = decodeProtectedHeader(token.slice(0, token.indexOf('~')));
    return nonEmpty(h.alg) && nonEmpty(h.kid) ? { alg: h.alg, kid: h.kid } : null;
  } catch {
    return null;
  }
}

/**
 * Verifies an AP2 presentation (issuer JWT ~ disclosures ~ [KB-JWT]) and binds it to the checkout.
 * Order: shape, issuer key, signature, expiry, disclosures, type, key binding, constraints.
 */
export async function verifyAp2(token: unknown, lookup: Ap2KeyLookup, c: Ap2Checkout, unavailable: () => Promise<Ap2Failure>): Promise<Ap2Failure | Ap2Verified> {
  if (typeof token !== 'string' || token.split('~').length < 2) return fail('MANDATE_MALFORMED', 'mandate.token must be an SD-JWT presentation (issuer-jwt~disclosure~...~[kb-jwt]).');
  const header = ap2Header(token);
  if (!header) return fail('MANDATE_MALFORMED', 'The AP2 issuer JWT header must be base64url JSON with alg and kid.');
  if (!AP2_ALGS.includes(header.alg)) return fail('MANDATE_MALFORMED', `The AP2 issuer JWT alg must be one of ${AP2_ALGS.join(', ')}, got ${header.alg}.`);
  let sdjwt: SDJwt;
  try {
    sdjwt = await SDJwt.fromEncode(token, digest);
  } catch (err) {
    return fail('MANDATE_MALFORMED', `The AP2 mandate is not an SD-JWT (${(err as Error).message}).`);
  }
  const found = await lookup(header);
  if (found === 'unavailable') return unavailable();
  if (found === 'unknown') return fail('MANDATE_ISSUER_UNKNOWN', `None of the merchant's trusted_ap2_issuers publishes the key ${header.kid}.`);

  const issuerJwt = token.slice(0, token.indexOf('~'));
  const [h, b, sig] = issuerJwt.split('.');
  if (!(await signatureVerifies(`${h}.${b}`, sig ?? '', found.key, [header.alg]))) {
    return fail('MANDATE_INVALID_SIGNATURE', 'The AP2 mandate signature does not verify against the trusted issuer key named by kid.');
  }
  let claims: Record<string, unknown>;
  try {
    const raw = sdjwt.jwt!.payload!;
    if (typeof raw.exp !== 'number') return fail('MANDATE_MALFORMED', 'The AP2 mandate must carry exp (unix seconds).');
    const now = unixSeconds(c.now);
    if (now >= raw.exp) return fail('MANDATE_EXPIRED', `The AP2 mandate expired at ${raw.exp} (now ${now}).`);
    // The library checks the signature again (the verifier) and iat/nbf, then discloses the claims.
    const sd = new SDJwtInstance({ hasher: digest, verifier: (data, s) => signatureVerifies(data, s, found.key, [header.alg]) });
    claims = (await sd.validate(token, { currentDate: now, skewSeconds: KB_SKEW_SECONDS })).payload as Record<string, unknown>;
  } catch (err) {
    return fail('MANDATE_MALFORMED', `The AP2 mandate does not validate (${(err as Error).message}).`);
  }

  // RFC 9901 section 7.1: every disclosure must be referenced by a digest the issuer signed (the library ignores strays).
  const payload = sdjwt.jwt!.payload!;
  const disclosures = sdjwt.disclosures ?? [];
  const alg = typeof payload._sd_alg === 'string' ? payload._sd_alg : 'sha-256';
  const byDigest = await createHashMapping(disclosures, { hasher: digest, alg });
  const referenced = new Set(Object.values((await unpack(payload, disclosures, digest)).disclosureKeymap));
  if (Object.keys(byDigest).length !== disclosures.length || Object.keys(byDigest).some((d) => !referenced.has(d))) {
    return fail('MANDATE_DISCLOSURE_INVALID', 'An AP2 disclosure matches no digest the issuer signed (tampered, repeated or foreign).');
  }

  const vct = claims.vct;
  if (typeof vct !== 'string' || !Object.values(AP2_VCT).includes(vct as never)) {
    return fail('MANDATE_MALFORMED', `The AP2 mandate vct must be one of ${Object.values(AP2_VCT).join(', ')}, got ${JSON.stringify(vct ?? null)}.`);
  }
  if (OPEN_VCTS.has(vct) && !isObj(claims.cnf)) return fail('MANDATE_MALFORMED', `An open AP2 mandate (${vct}) must bind the agent key in cnf.`);
  if (claims.cnf !== undefined) {
    const kb = await checkKeyBinding(token, sdjwt, claims, c);
    if (kb) return kb;
  }
  const violated = checkConstraints(vct, claims, c);
  if (violated) return violated;
  return { ok: true, vct, ref: `ap2:${sha256url(issuerJwt)}`, issuer: found.issuer, maxAmount: c.total };
}
