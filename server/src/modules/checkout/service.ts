import { unixSeconds as unix } from '../../lib/time.js';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { getAddress, isAddress } from 'viem';
import { CHAINS, resolvePolicy, type CheckoutCreated, type CreateCheckoutBody, type PaymentRequired, type RailName, type SessionView, type TrustTier } from '@svc/contract';
import type { AuthContext, Ctx } from '../../http/context.js';
import type { Em } from '../../db/orm.js';
import { canonicalHash } from '../../lib/canonical-json.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix, newId } from '../../lib/ids.js';
import { cartTotals, lineTotal, toBaseUnits } from '../../lib/money.js';
import { effectiveRails, findProjectMerchant } from '../merchants/index.js';
import type { MerchantRow } from '../merchants/index.js';
import { railSettles } from '../policy/index.js';
import { explainVerdict } from '../gate/index.js';
import { totalOf, type SessionLine, type SessionRow } from './entity.js';
import { enforceRateLimit, rateLimitWindow } from './rate-limit.js';
import { reviewWindowLapsed, sessionStateAt } from './state.js';
import { findSessionRow, insertSession, readCheckoutInputs, sessionById, sessionByIdempotencyKey, type NewSession } from './store.js';


export function settleCall(prefix: string, sessionId: string, rail: RailName): string {
  const body =
    rail === 'mock'
      ? '{"payment":{"mock":true}}'
      : '{"payment":{"scheme":"x402-exact","authorization":{"from","to","value","validAfter","validBefore","nonce"},"signature":"0x..."}}';
  return `POST ${prefix}/agent/checkout/${sessionId}/settle ${body}`;
}
export const pollCall = (prefix: string, sessionId: string) => `GET ${prefix}/agent/checkout/${sessionId}`;

export function paymentRequiredOf(s: Pick<SessionRow, 'expiresAt' | 'rail' | 'chain' | 'payTo' | 'total' | 'currency' | 'amountBaseUnits'>): PaymentRequired {
  const validUntil = unix(s.expiresAt);
  if (s.rail === 'x402' && s.chain) {
    const chain = CHAINS[s.chain];
    return {
      rail: 'x402',
      scheme: 'x402-exact',
      payTo: s.payTo ?? null,
      amount: toBaseUnits(s.total).amount,
      currency: s.currency,
      amountBaseUnits: s.amountBaseUnits ?? null,
      chain: s.chain,
      chainId: chain.chainId,
      asset: 'USDC',
      verifyingContract: chain.usdc,
      eip712Domain: { name: chain.domainName, version: chain.domainVersion },
      validUntil,
    };
  }
  return {
    rail: s.rail,
    scheme: s.rail === 'mock' ? 'mock' : 'card',
    payTo: s.payTo ?? null,
    amount: s.total,
    currency: s.currency,
    amountBaseUnits: null,
    chain: null,
    chainId: null,
    asset: null,
    verifyingContract: null,
    eip712Domain: null,
    validUntil,
  };
}

/** Rails agents can use: enabled, configured, valid in the mode and allowed by the active policy. */
export function agentRails(m: Pick<MerchantRow, 'rails' | 'receiving' | 'livemode'>, allowed: RailName[] | null): RailName[] {
  return effectiveRails(m.rails, m.receiving).filter((r) => !(m.livemode && r === 'mock') && (!allowed || allowed.includes(r)));
}

/** Picks the requested rail or the first one the merchant offers, policy allows and the mode permits. */
function chooseRail(m: MerchantRow, allowed: RailName[] | null, requested: RailName | undefined): RailName {
  const usable = agentRails(m, allowed);
  if (requested) {
    if (!usable.includes(requested)) {
      throw new ApiError('RAIL_NOT_ALLOWED', `Rail ${requested} is not offered by this merchant in this mode or not allowed by its policy (offered: ${usable.join(', ') || 'none'}).`);
    }
    return requested;
  }
  const first = usable[0];
  if (!first) throw new ApiError('RAIL_NOT_ALLOWED', 'This merchant offers no rail its policy allows.');
  return first;
}

/**
 * `known`: the agent's session with this idempotency key, when the caller looked it up already
 * (`findSessionByAgentKey`, the x402 paid resource), so it is not read twice.
 */
export async function createCheckout(ctx: Ctx, m: MerchantRow, prefix: string, input: CreateCheckoutBody, known?: { prior: SessionRow | null }): Promise<CheckoutCreated> {
  const { em } = ctx;
  // A UUID is case-insensitive: one spelling per agent for the rate limit, idempotency and reputation.
  const body: CreateCheckoutBody = { ...input, agent_id: input.agent_id.toLowerCase() };
  const requestHash = canonicalHash({ merchant: m.id, body });
  if (body.idempotency_key) {
    const prior = known ? known.prior : await sessionByIdempotencyKey(em, { agentId: body.agent_id, idempotencyKey: body.idempotency_key });
    const replay = idempotentCreate(prior, requestHash);
    if (replay) return replay;
  }
  // The rate limit's hit, the cart's catalog rows and the active policy: one statement.
  const skus = body.items.map((i) => i.sku);
  const hitAt = ctx.services.now();
  const windowStart = rateLimitWindow(hitAt);
  const inputs = await readCheckoutInputs(em, m.id, skus, `checkout:${m.id}:${body.agent_id}`, windowStart);
  enforceRateLimit(inputs.hits, ctx.services.config.SVC_CHECKOUT_RATE_PER_MINUTE, windowStart, hitAt);

  const products = inputs.items;
  const bySku = new Map(products.map((p) => [p.sku, p]));
  const unknown = skus.filter((s) => !bySku.has(s));
  if (unknown.length) throw new ApiError('SKU_UNKNOWN', `Unknown SKU(s): ${unknown.join(', ')}.`);
  const unavailable = skus.filter((s) => !bySku.get(s)!.available);
  if (unavailable.length) throw new ApiError('SKU_UNAVAILABLE', `Unavailable SKU(s): ${unavailable.join(', ')}.`);
  const currencies = [...new Set(products.map((p) => p.currency))];
  if (currencies.length !== 1) {
    throw new ApiError('CURRENCY_UNSUPPORTED', `The cart mixes currencies (${currencies.join(', ')}); one session pays in one currency.`);
  }
  const currency = currencies[0]!;

  const policy = resolvePolicy(inputs.policy?.body);
  const rail = chooseRail(m, policy.allowedRails, body.rail);
  if (!railSettles(rail, currency)) {
    throw new ApiError('CURRENCY_UNSUPPORTED', `A ${currency} cart cannot be paid over ${rail}${rail === 'x402' ? ' (USDC settles USD only)' : ''}.`);
  }

  const lines: SessionLine[] = body.items.map((i) => {
    const p = bySku.get(i.sku)!;
    return { sku: p.sku, name: p.name, qty: i.qty, unitPrice: p.priceAmount, lineTotal: lineTotal(p.priceAmount, i.qty), productId: p.id };
  });
  const totals = cartTotals(lines.map((l) => ({ unitPrice: l.unitPrice, qty: l.qty })), currency);
  const now = ctx.services.now();
  const expiresAt = new Date(now.getTime() + ctx.services.config.SVC_SESSION_TTL_SECONDS * 1000);
  const x402 = rail === 'x402' ? m.receiving.x402 : undefined;
  const id = newId('sess');
  const session: NewSession = {
    id,
    merchantId: m.id,
    livemode: m.livemode,
    agentId: body.agent_id,
    state: 'awaiting_payment',
    lines,
    currency,
    subtotal: totals.subtotal,
    tax: totals.tax,
    total: totals.total,
    amountBaseUnits: x402 ? toBaseUnits(totals.total).baseUnits : null,
    rail,
    payTo: x402 ? x402.address : rail === 'mock' ? (m.receiving.mock?.account ?? null) : null,
    chain: x402 ? x402.chain : null,
    asset: x402 ? 'USDC' : null,
    buyer: body.buyer ?? null,
    buyerIntent: body.buyer_intent ?? null,
    mandate: body.mandate ? { type: body.mandate.type, token: body.mandate.token, raw: body.mandate.raw } : null,
    pathPrefix: prefix,
    idempotencyKey: body.idempotency_key ?? null,
    requestHash,
    createResponse: null,
    createdAt: now,
    expiresAt,
  };
  const response: CheckoutCreated = {
    session_id: id,
    state: 'awaiting_payment',
    livemode: m.livemode,
    total: totalOf(session),
    payment_required: paymentRequiredOf(session),
    expires_at: unix(expiresAt),
    next: settleCall(prefix, id, rail),
  };
  session.createResponse = JSON.stringify(response);
  try {
    await insertSession(em, session);
  } catch (err) {
    // Two concurrent creates with one idempotency key: the unique index let one win; replay it.
    if (err instanceof UniqueConstraintViolationException && body.idempotency_key) {
      const replay = await findIdempotentCreate(em, body.agent_id, body.idempotency_key, requestHash);
      if (replay) return replay;
    }
    throw err;
  }
  return response;
}

async function findIdempotentCreate(em: Em, agentId: string, key: string, requestHash: string): Promise<CheckoutCreated | null> {
  return idempotentCreate(await sessionByIdempotencyKey(em, { agentId, idempotencyKey: key }), requestHash);
}

function idempotentCreate(prior: SessionRow | null, requestHash: string): CheckoutCreated | null {
  if (!prior) return null;
  if (prior.requestHash !== requestHash) throw new ApiError('IDEMPOTENCY_KEY_REUSED', 'This idempotency_key was already used by this agent with a different request.');
  return JSON.parse(prior.createResponse!) as CheckoutCreated;
}

export async function findSession(em: Em, m: Pick<MerchantRow, 'id'>, id: string): Promise<SessionRow> {
  const s = await sessionById(em, id);
  if (!s || s.merchantId !== m.id) throw new ApiError('SESSION_NOT_FOUND');
  return s;
}

/** The agent's session with this idempotency key at any merchant (one per agent and key), if any: what `createCheckout` replays. */
export async function findSessionByAgentKey(em: Em, agentId: string, key: string): Promise<SessionRow | null> {
  return sessionByIdempotencyKey(em, { agentId: agentId.toLowerCase(), idempotencyKey: key });
}

/** A session of one of the key's merchants (project and mode), else 404. */
export async function sessionForMerchantKey(em: Em, auth: AuthContext, id: string): Promise<{ session: SessionRow; merchant: MerchantRow }> {
  const session = hasPrefix(id, 'sess') ? await findSessionRow(em, id) : null;
  const merchant = session ? await findProjectMerchant(em, { id: session.merchantId, projectId: auth.projectId, livemode: auth.livemode }) : null;
  if (!session || !merchant) throw new ApiError('NOT_FOUND', 'No such session.');
  return { session, merchant };
}

/** GET /v1/sessions/<id>: the poll view of one of the key's sessions. */
export async function getMerchantSession(ctx: Ctx & { auth: AuthContext }, id: string) {
  const { session } = await sessionForMerchantKey(ctx.em, ctx.auth, id);
  return sessionView(session, ctx.services.now());
}

/** The address that signed the session's x402 authorization (its `from`), checksummed; null before a payment or on other rails. */
function payerOf(s: Pick<SessionRow, 'payment'>): string | null {
  const from = (s.payment as { authorization?: { from?: unknown } } | null)?.authorization?.from;
  return typeof from === 'string' && isAddress(from, { strict: false }) ? getAddress(from) : null;
}

/** The poll view of decisions.md (camelCase, unix seconds). */
export function sessionView(s: SessionRow, now: Date, reviewNext?: string): SessionView {
  // A hold nobody reviewed in its window is rejected; the merchant's next approve/decline commits it.
  const lapsed = reviewWindowLapsed(s, now);
  const state = sessionStateAt(s, now);
  const verdict = s.verdict && lapsed ? { ...s.verdict, decision: 'reject' as const, reasonCodes: ['REVIEW_WINDOW_EXPIRED'] } : s.verdict;
  const view: SessionView = {
    id: s.id,
    merchantId: s.merchantId,
    agentId: s.agentId,
    state,
    livemode: s.livemode,
    lines: s.lines.map((l) => ({ sku: l.sku, name: l.name, qty: l.qty, unitPrice: l.unitPrice, lineTotal: l.lineTotal })),
    total: totalOf(s),
    railName: s.rail,
    verdict: verdict ? { decision: verdict.decision, tier: verdict.tier as TrustTier, reasonCodes: verdict.reasonCodes, signals: verdict.signals } : null,
    ...(verdict ? { verdictReasons: explainVerdict(verdict) } : {}),
    payer: payerOf(s),
    receipt: s.receiptJws ?? null,
    orderId: s.orderId ?? null,
    settlement: s.settlementRef ? { rail: s.rail, reference: s.settlementRef } : null,
    ...(s.paymentError ? { paymentError: s.paymentError } : {}),
    createdAt: unix(s.createdAt),
    expiresAt: unix(s.expiresAt),
  };
  if (state === 'awaiting_payment' || state === 'approved') {
    view.paymentRequired = paymentRequiredOf(s);
    view.next = settleCall(s.pathPrefix, s.id, s.rail);
  }
  if (state === 'held') {
    view.next = reviewNext ?? pollCall(s.pathPrefix, s.id);
    if (s.holdExpiresAt) view.reviewExpiresAt = unix(s.holdExpiresAt);
  }
  if (state === 'settling') view.next = pollCall(s.pathPrefix, s.id);
  return view;
}
