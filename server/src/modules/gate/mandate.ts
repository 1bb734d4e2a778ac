import { unixSeconds } from '../../lib/time.js';
import { compactVerify, createRemoteJWKSet, customFetch, decodeProtectedHeader, errors as joseErrors, type FetchImplementation } from 'jose';
import type { MandateInput, MandateType, ReasonCode } from '@svc/contract';
import { compareDecimal } from '../../lib/money.js';
import { checkOutboundUrl, guardedGet, untilBudget, type OutboundRules, type Resolver } from '../../lib/ssrf.js';
import { ap2Header, verifyAp2, type Ap2KeyLookup } from './ap2.js';

export type MandateResult = {
  type: MandateType;
  /** A mandate of any type was sent. */
  present: boolean;
  /** No mandate, or a mandate that verified and binds to this checkout. */
  ok: boolean;
  code?: ReasonCode;
  human?: string;
  /** The single-use reference the gate reserves (the svc `sub`, the AP2 issuer JWT's hash); null unless ok and present. */
  ref: string | null;
  issuer?: string;
  subject?: string;
  intent?: string | null;
  maxAmount?: string;
};

export type MandateContext = {
  jwksUrl: string | null;
  /** The merchant's trusted_ap2_issuers (JWKS URLs); none accepts no ap2 mandate. */
  ap2Issuers?: readonly string[];
  /** The session's lines, for an AP2 checkout mandate's cart. */
  lines?: ReadonlyArray<{ sku: string; qty: number; unitPrice: string }>;
  merchantId: string;
  /** The merchant's verified domain (a mandate may name it instead of the id); null while unverified, when only the id matches. */
  merchantDomain: string | null;
  total: string;
  currency: string;
  agentId: string;
  now: Date;
  /** The process's fetched issuer key sets (services.caches.issuerKeys); without it every check fetches. */
  issuerKeys?: IssuerKeySets;
  /**
   * JWKS fetch timeout and fixed budget (2 s unless a test shortens it): every
   * MANDATE_ISSUER_UNAVAILABLE answer waits until it has passed since the check began.
   */
  timeoutMs?: number;
  /** The outbound rules of the merchant's mode and the configuration (lib/ssrf.ts `outboundRules`). */
  rules: OutboundRules;
  /** A test's DNS resolver for the connect-time address check; the system resolver otherwise. */
  resolve?: Resolver;
};

export const SVC_MANDATE_TYP = 'svc-mandate+jws';
export const JWKS_TIMEOUT_MS = 2_000;
/** How long a fetched issuer JWKS is trusted before a refetch (an unknown kid refetches sooner, after jose's 30 s cooldown). */
export const JWKS_CACHE_MAX_AGE_MS = 10 * 60_000;
/** A key set is a few hundred bytes; anything past this is not one. */
export const JWKS_MAX_BYTES = 64 * 1024;
/** The only text an agent sees when the issuer keys cannot be had, whatever the cause (no port or network probing). */
export const ISSUER_UNAVAILABLE_HUMAN = 'The trusted issuer JWKS could not be fetched; retry shortly.';

type RemoteJwks = ReturnType<typeof createRemoteJWKSet>;
/** One remote key set per (URL, timeout, restriction), so every session of a merchant shares the cached keys (held by the services). */
export type IssuerKeySets = Map<string, RemoteJwks>;

/** jose's fetch replaced by the guarded GET: address rules at connect time, size and time caps, no redirects. */
function guardedFetch(rules: OutboundRules, timeoutMs: number, resolve: Resolver | undefined): FetchImplementation {
  return async (url, options) => {
    const res = await guardedGet(url, {
      rules,
      timeoutMs,
      maxBytes: JWKS_MAX_BYTES,
      headers: Object.fromEntries(options.headers.entries()),
      signal: options.signal,
      resolve,
    });
    if (res.status !== 200) return new Response(null, { status: res.status >= 200 && res.status <= 599 ? res.status : 502 });
    return new Response(new Uint8Array(res.body), { status: 200, headers: { 'content-type': res.headers['content-type'] ?? 'application/json' } });
  };
}

function remoteJwks(url: string, timeoutMs: number, rules: OutboundRules, resolve: Resolver | undefined, remoteSets: IssuerKeySets | undefined): RemoteJwks {
  const key = `${timeoutMs} ${rules.reach} ${url}`;
  let set = resolve ? undefined : remoteSets?.get(key);
  if (!set) {
    set = createRemoteJWKSet(new URL(url), {
      timeoutDuration: timeoutMs,
      cacheMaxAge: JWKS_CACHE_MAX_AGE_MS,
      [customFetch]: guardedFetch(rules, timeoutMs, resolve),
    });
    if (!resolve) remoteSets?.set(key, set);
  }
  return set;
}

/**
 * Whether `verifyMandate` can answer from this process alone (no fetch, no wait): no mandate, one
 * that fails before its keys are needed, or an svc mandate whose issuer key set is cached, fresh
 * and holds the token's kid. The settle checks it inside its transaction: when false, the mandate
 * is verified after that transaction is rolled back (docs/settlement.md, "Statement budget").
 */
export function mandateVerifiableOffline(
  input: MandateInput | null | undefined,
  ctx: Pick<MandateContext, 'jwksUrl' | 'ap2Issuers' | 'issuerKeys' | 'timeoutMs' | 'rules' | 'resolve'>,
): boolean {
  if (input?.type === 'ap2') {
    const kid = ap2Header(input.token)?.kid;
    const urls = ctx.ap2Issuers ?? [];
    // AP2: a cached, fresh set holding the kid is used first, with no fetch (verifyAp2Mandate's lookup)
    return !kid || urls.length === 0 || urls.some((url) => cachedHolds(url, kid, ctx) === 'holds');
  }
  if (!input || input.type !== 'svc' || typeof input.token !== 'string' || input.token.split('.').length !== 3 || !ctx.jwksUrl) return true;
  let kid: unknown;
  try {
    kid = decodeProtectedHeader(input.token).kid;
  } catch {
    return true;
  }
  if (!nonEmpty(kid)) return true;
  return cachedHolds(ctx.jwksUrl, kid, ctx) === 'holds';
}

/** Whether the cached, fresh key set of `url` holds `kid` (`holds`, `lacks`), or answering needs a fetch or a wait (`wait`). */
function cachedHolds(url: string, kid: string, ctx: Pick<MandateContext, 'issuerKeys' | 'timeoutMs' | 'rules' | 'resolve'>): 'holds' | 'lacks' | 'wait' {
  // an address the rules refuse answers after the fixed budget: a wait, so not inside a transaction
  if (ctx.resolve || !checkOutboundUrl(url, ctx.rules).ok) return 'wait';
  const set = ctx.issuerKeys?.get(`${ctx.timeoutMs ?? JWKS_TIMEOUT_MS} ${ctx.rules.reach} ${url}`);
  if (!set || !set.fresh || set.reloading) return 'wait';
  return set.jwks()?.keys.some((k) => k.kid === kid) ? 'holds' : 'lacks';
}

const DECIMAL_RE = /^\d+(\.\d+)?$/;
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

type Claims = {
  iss: string;
  sub: string;
  exp: number;
  decision: string;
  agent_id: string;
  authorization: { merchant: string; max_amount: string; currency: string; intent: string | null };
};

/** Claim shape check; returns the first problem as a human line, or the typed claims. */
function parseClaims(payload: Uint8Array): Claims | string {
  let c: unknown;
  try {
    c = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    return 'the payload is not JSON';
  }
  if (!isObj(c)) return 'the payload is not a JSON object';
  for (const k of ['iss', 'sub', 'decision', 'agent_id'] as const) {
    if (!nonEmpty(c[k])) return `claim ${k} must be a non-empty string`;
  }
  if (typeof c.exp !== 'number' || !Number.isFinite(c.exp)) return 'claim exp must be a NumericDate (unix seconds)';
  const a = c.authorization;
  if (!isObj(a)) return 'claim authorization must be an object';
  if (!nonEmpty(a.merchant)) return 'authorization.merchant must be the merchant id or domain';
  if (typeof a.max_amount !== 'string' || !DECIMAL_RE.test(a.max_amount)) return 'authorization.max_amount must be a decimal string like "25.00"';
  if (!nonEmpty(a.currency)) return 'authorization.currency must be a currency code';
  if (!('intent' in a) || (a.intent !== null && typeof a.intent !== 'string')) return 'authorization.intent must be a string or null';
  return c as unknown as Claims; // every field Claims declares was checked above, one by one
}

/** Maps a jose failure to its mandate code: key-set trouble is the issuer's, a bad signature or unknown kid is the token's. */
function classify(err: unknown): { code: ReasonCode; human: string } {
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) {
    return { code: 'MANDATE_INVALID_SIGNATURE', human: 'The svc mandate signature does not verify against the issuer key named by kid.' };
  }
  if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) {
    return { code: 'MANDATE_INVALID_SIGNATURE', human: 'The trusted issuer JWKS has no single EdDSA key with the mandate kid.' };
  }
  if (err instanceof joseErrors.JWSInvalid || err instanceof joseErrors.JOSENotSupported) {
    return { code: 'MANDATE_MALFORMED', human: `The svc mandate is not a valid compact JWS (${(err as Error).message}).` };
  }
  // Timeouts, refused addresses, network errors, non-200 responses, oversized bodies, a body that is
  // not a JWK Set: one text, so the answer never tells an open port from a closed one.
  return { code: 'MANDATE_ISSUER_UNAVAILABLE', human: ISSUER_UNAVAILABLE_HUMAN };
}

/**
 * Verifies a mandate and binds it to this checkout (decisions.md "Mandates and trust").
 * Failures carry one code, checked in order: shape, issuer keys, signature, claims, expiry,
 * decision, merchant, agent, currency and amount. Replay (MANDATE_REPLAY) is not checked here:
 * the gate reserves `ref` under a unique constraint. `input` is the checkout's mandate as the agent sent it, if any.
 */
export async function verifyMandate(input: MandateInput | null | undefined, ctx: MandateContext): Promise<MandateResult> {
  if (input == null || input.type === 'none') return { type: 'none', present: false, ok: true, ref: null };
  const type = input.type;
  const fail = (code: ReasonCode, human: string, extra: Partial<MandateResult> = {}): MandateResult => ({
    type,
    present: true,
    ok: false,
    code,
    human,
    ref: null,
    ...extra,
  });
  if (type === 'acp') {
    return fail(
      'MANDATE_TYPE_UNSUPPORTED',
      'acp mandates cannot be verified: the Agentic Commerce Protocol has no crypto payment handler yet (its x402 proposal is open), so nothing binds one to a USDC payment; send an ap2 or svc mandate, or none.',
    );
  }
  if (type === 'ap2') return verifyAp2Mandate(input, ctx, fail);
  if (type !== 'svc') return fail('MANDATE_MALFORMED', 'mandate.type must be svc, ap2, acp or none.');

  const token = input.token;
  if (typeof token !== 'string' || token.split('.').length !== 3) {
    return fail('MANDATE_MALFORMED', 'mandate.token must be a compact JWS (header.payload.signature).');
  }
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    return fail('MANDATE_MALFORMED', 'The svc mandate protected header is not base64url JSON.');
  }
  if (header.alg !== 'EdDSA') return fail('MANDATE_MALFORMED', `The svc mandate header alg must be EdDSA, got ${String(header.alg)}.`);
  if (header.typ !== SVC_MANDATE_TYP) {
    return fail('MANDATE_MALFORMED', `The svc mandate header typ must be ${SVC_MANDATE_TYP}, got ${String(header.typ)}.`);
  }
  // decisions.md: the key is chosen by kid, so a token without one cannot name its key.
  if (!nonEmpty(header.kid)) return fail('MANDATE_MALFORMED', 'The svc mandate header must carry the kid of the issuer key.');

  if (!ctx.jwksUrl) {
    return fail(
      'MANDATE_INVALID_SIGNATURE',
      'The merchant has no trusted_svc_jwks_url configured, so no svc mandate can verify; the merchant must set one to accept svc mandates.',
    );
  }

  // The issuer's keys cannot be had: one text, and only once the fixed budget has passed since
  // the check began, so neither the text nor the time of the answer tells a closed port, an
  // open one that hangs up or answers 404, a silent one and a refused address apart.
  const timeoutMs = ctx.timeoutMs ?? JWKS_TIMEOUT_MS;
  const startedAt = performance.now();
  const unavailable = async () => {
    await untilBudget(startedAt, timeoutMs);
    return fail('MANDATE_ISSUER_UNAVAILABLE', ISSUER_UNAVAILABLE_HUMAN);
  };

  // The URL was checked when written; checked again here (rows from before the rule, a mode or configuration change).
  if (!checkOutboundUrl(ctx.jwksUrl, ctx.rules).ok) return unavailable();

  let payload: Uint8Array;
  try {
    const keys = remoteJwks(ctx.jwksUrl, timeoutMs, ctx.rules, ctx.resolve, ctx.issuerKeys);
    ({ payload } = await compactVerify(token, keys, { algorithms: ['EdDSA'] }));
  } catch (err) {
    const { code, human } = classify(err);
    return code === 'MANDATE_ISSUER_UNAVAILABLE' ? unavailable() : fail(code, human);
  }

  const claims = parseClaims(payload);
  if (typeof claims === 'string') return fail('MANDATE_MALFORMED', `The svc mandate claims are invalid: ${claims}.`);
  const a = claims.authorization;
  const known = { issuer: claims.iss, subject: claims.sub, intent: a.intent, maxAmount: a.max_amount };

  const nowSec = unixSeconds(ctx.now);
  if (nowSec >= claims.exp) return fail('MANDATE_EXPIRED', `The svc mandate expired at ${claims.exp} (now ${nowSec}).`, known);
  if (claims.decision !== 'approve') {
    return fail('MANDATE_NOT_APPROVED', `The svc mandate decision is "${claims.decision}", not "approve".`, known);
  }
  const merchantMatches = a.merchant === ctx.merchantId || (ctx.merchantDomain !== null && a.merchant.toLowerCase() === ctx.merchantDomain.toLowerCase());
  if (!merchantMatches) {
    const named = ctx.merchantDomain ? `${ctx.merchantId} (${ctx.merchantDomain})` : `${ctx.merchantId} (its domain is not verified)`;
    return fail('MANDATE_MERCHANT_MISMATCH', `The svc mandate authorizes merchant "${a.merchant}", not ${named}.`, known);
  }
  // A mandate is issued to one agent; another agent presenting it is a binding failure of its own code.
  if (claims.agent_id.toLowerCase() !== ctx.agentId.toLowerCase()) {
    return fail('MANDATE_AGENT_MISMATCH', `The svc mandate was issued to agent ${claims.agent_id}, not ${ctx.agentId}.`, known);
  }
  if (a.currency.toUpperCase() !== ctx.currency.toUpperCase()) {
    return fail('MANDATE_AMOUNT_INSUFFICIENT', `The svc mandate is in ${a.currency}; the cart is in ${ctx.currency}.`, known);
  }
  if (compareDecimal(a.max_amount, ctx.total) < 0) {
    return fail('MANDATE_AMOUNT_INSUFFICIENT', `The svc mandate allows at most ${a.max_amount} ${a.currency}; the cart total is ${ctx.total}.`, known);
  }
  return { type: 'svc', present: true, ok: true, ref: claims.sub, ...known };
}

/**
 * An ap2 mandate: the issuer key is looked up by kid in the merchant's trusted_ap2_issuers (each set
 * fetched through the guarded GET and cached like the svc issuer's), then gate/ap2.ts verifies it.
 */
async function verifyAp2Mandate(input: MandateInput, ctx: MandateContext, fail: (code: ReasonCode, human: string) => MandateResult): Promise<MandateResult> {
  const urls = ctx.ap2Issuers ?? [];
  const timeoutMs = ctx.timeoutMs ?? JWKS_TIMEOUT_MS;
  const startedAt = performance.now();
  const lookup: Ap2KeyLookup = async (header) => {
    let unreachable = false;
    const cachedFirst = urls.find((url) => cachedHolds(url, header.kid, ctx) === 'holds');
    for (const url of cachedFirst ? [cachedFirst] : urls) {
      if (!checkOutboundUrl(url, ctx.rules).ok) {
        unreachable = true;
        continue;
      }
      try {
        const key = await remoteJwks(url, timeoutMs, ctx.rules, ctx.resolve, ctx.issuerKeys)(header, { payload: '', signature: '' } as never);
        return { key, issuer: url };
      } catch (err) {
        if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys || err instanceof joseErrors.JOSENotSupported) continue;
        unreachable = true;
      }
    }
    return unreachable ? 'unavailable' : 'unknown';
  };
  const checkout = { merchantId: ctx.merchantId, merchantDomain: ctx.merchantDomain, currency: ctx.currency, total: ctx.total, lines: ctx.lines ?? [], now: ctx.now };
  const unavailable = async () => {
    await untilBudget(startedAt, timeoutMs);
    return { ok: false as const, code: 'MANDATE_ISSUER_UNAVAILABLE' as const, human: ISSUER_UNAVAILABLE_HUMAN };
  };
  const r = await verifyAp2(input.token, lookup, checkout, unavailable);
  if (!r.ok && r.code === 'MANDATE_ISSUER_UNKNOWN' && urls.length === 0) {
    return fail(r.code, 'The merchant trusts no AP2 issuer (trusted_ap2_issuers is empty), so no ap2 mandate can verify; the merchant must list its issuers\' JWKS URLs.');
  }
  if (!r.ok) return fail(r.code, r.human);
  return { type: 'ap2', present: true, ok: true, ref: r.ref, issuer: r.issuer, subject: r.ref, intent: r.vct, maxAmount: r.maxAmount };
}
