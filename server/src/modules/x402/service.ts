import { unixSeconds } from '../../lib/time.js';
import type { ServerInferResponses } from '@ts-rest/core';
import { resolvePolicy, X402PaymentPayload, type contract, type ReasonCode, type SettleBody, type X402Challenge } from '@svc/contract';
import type { PaymentRequired as X402PaymentRequired, SettleResponse } from '@x402/core/types';
import type { Hex } from 'viem';
import type { Ctx } from '../../http/context.js';
import { canonicalHash } from '../../lib/canonical-json.js';
import { ApiError } from '../../lib/errors.js';
import { findUnstorableJson } from '../../http/body-guard.js';
import { cartTotals, toBaseUnits } from '../../lib/money.js';
import { findCatalogItem } from '../catalog/index.js';
import { agentRails, assertPayable, createCheckout, findSession, findSessionByAgentKey } from '../checkout/index.js';
import { settleSession, type SettleMerchantRef, type SettlePayment, type SettleResult } from '../settlement/index.js';
import { checkProof } from '../../lib/eip3009.js';
import { facilitatorFor } from '../../rails/index.js';
import type { MerchantRow } from '../merchants/index.js';
import { activePolicy } from '../policy/index.js';
import { payerAgentId } from './agent-id.js';
import {
  canonicalPayment,
  chainOfNetwork,
  challenge,
  decodePaymentHeader,
  networkOf,
  paymentResponseHeader,
  settleResponseOf,
  type ReadPayment,
  type Refused,
  type X402Due,
  type X402Version,
} from './wire.js';

/**
 * How the payment arrived: the x402 header (if any), or (MCP) the PaymentPayload already
 * decoded from `_meta["x402/payment"]` (`payload`, undefined when none was sent); the URL
 * asked for; where hosted links point.
 */
export type X402Transport = { header: { version: X402Version; value: string } | null; payload?: unknown; resourceUrl: string; baseUrl: string };

/**
 * What a handler sends: one of its route's contract responses, and the x402 headers to set;
 * `x402` holds the objects those headers encode (the v2 PaymentRequired of a 402, the
 * SettleResponse of a paid answer) for a transport that sends them unencoded (MCP `_meta`).
 */
export type Reply<R extends { status: number }> = {
  response: R;
  headers: Record<string, string>;
  x402?: { required?: X402PaymentRequired; settled?: SettleResponse };
};
/** The settle route's answers (`contract.agent.settle`): the workflow's outcome, or an x402 challenge. */
export type SettleReply = Reply<SettleResult>;
/** The paid resource's answers (`contract.x402.resource`). */
export type PurchaseReply = Reply<ServerInferResponses<typeof contract.x402.resource, 200 | 202 | 402>>;

const NONCE_RE = /^0x[0-9a-fA-F]{64}$/;

const isRefused = (r: ReadPayment | Refused): r is Refused => 'refused' in r;

/** A payment header decoded and validated against the contract's x402 PaymentPayload. */
export function readPaymentHeader(value: string): ReadPayment | Refused {
  const decoded = decodePaymentHeader(value);
  if (decoded === null) return { refused: 'PAYMENT_MALFORMED', human: 'The payment header is not base64-encoded JSON.' };
  return readPaymentJson(decoded, 'The payment header');
}

/** A decoded x402 PaymentPayload (a header's JSON, or MCP `_meta["x402/payment"]`) validated against the contract's schema. */
export function readPaymentJson(decoded: unknown, what: string): ReadPayment | Refused {
  // What the body guard refuses in a JSON body (NUL, lone surrogates) is refused in a header too.
  const unstorable = findUnstorableJson(decoded, 'payment');
  if (unstorable) return { refused: 'PAYMENT_MALFORMED', human: `${unstorable[0]}: ${unstorable[1]}.` };
  const parsed = X402PaymentPayload.safeParse(decoded);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { refused: 'PAYMENT_MALFORMED', human: `${what} is not an x402 exact-scheme PaymentPayload${issue ? ` (${issue.path.join('.') || 'payload'}: ${issue.message})` : ''}.` };
  }
  return canonicalPayment(parsed.data);
}

/** The payment a transport carried, read (null: none was sent). */
function readTransportPayment(input: X402Transport): ReadPayment | Refused | null {
  if (input.header) return readPaymentHeader(input.header.value);
  if (input.payload !== undefined) return readPaymentJson(input.payload, '_meta["x402/payment"]');
  return null;
}

/** A cart as x402 pays for it: one line per SKU. */
export type X402Cart = Array<{ sku: string; qty: number }>;

/**
 * The x402 requirement of a cart of catalog items, without opening a session (an unpaid
 * request writes nothing): the same SKU, rail and currency checks and the same money functions
 * as createCheckout, so the paid request's session asks exactly this amount.
 */
export async function quoteItems(ctx: Ctx, m: MerchantRow, cart: X402Cart, resourceUrl: string): Promise<X402Due> {
  const lines: Array<{ name: string; qty: number; unitPrice: string; currency: string }> = [];
  for (const { sku, qty } of cart) {
    const item = await findCatalogItem(ctx.em, m.id, sku);
    if (!item) throw new ApiError('SKU_UNKNOWN', `Unknown SKU: ${sku}.`);
    if (!item.available) throw new ApiError('SKU_UNAVAILABLE', `Unavailable SKU: ${sku}.`);
    lines.push({ name: item.name, qty, unitPrice: item.priceAmount, currency: item.currency });
  }
  const policy = resolvePolicy((await activePolicy(ctx.em, m.id))?.body);
  const x402 = m.receiving.x402;
  if (!x402 || !agentRails(m, policy.allowedRails).includes('x402')) {
    throw new ApiError('RAIL_NOT_ALLOWED', 'This merchant does not offer the x402 rail in this mode (or its policy does not allow it).');
  }
  const foreign = lines.find((l) => l.currency !== 'USD');
  if (foreign) throw new ApiError('CURRENCY_UNSUPPORTED', `A ${foreign.currency} item cannot be paid over x402 (USDC settles USD only).`);
  const { total } = cartTotals(lines, 'USD');
  return {
    chain: x402.chain,
    payTo: x402.address,
    amountBaseUnits: toBaseUnits(total).baseUnits,
    resourceUrl,
    description: lines.map((l) => (l.qty === 1 ? l.name : `${l.qty} x ${l.name}`)).join(', '),
  };
}

/** The x402 answer to a refused payment: a 402 challenge (PAYMENT-REQUIRED and the v1 body). */
const refusal402 = (due: X402Due, code: ReasonCode | string, human: string, sessionId?: string): Reply<{ status: 402; body: X402Challenge }> => {
  const c = challenge(due, { status: 'payment_invalid', reason_codes: [code], error_human: human }, sessionId);
  return { response: { status: 402, body: c.body }, headers: c.headers, x402: { required: c.required } };
};

/** The JSON answer to a payment the wire format already refused. */
const jsonRefusal = (r: Refused): SettleReply => ({
  response: { status: 402, body: { status: 'payment_invalid', reason_codes: [r.refused], error_human: r.human } },
  headers: {},
});

/** The payment matches the requirement's scheme and network (the facilitator checks the rest). */
function schemeAndNetwork(due: X402Due, read: ReadPayment): { code: ReasonCode; human: string } | null {
  if ('mock' in read.payment || read.payment.scheme !== 'x402-exact') {
    return { code: 'PAYMENT_SCHEME_UNSUPPORTED', human: 'Pay with the x402 `exact` scheme (EIP-3009 transferWithAuthorization).' };
  }
  if (read.network !== null && chainOfNetwork(read.network) !== due.chain) {
    return { code: 'PAYMENT_NETWORK_MISMATCH', human: `This merchant settles on ${due.chain} (${networkOf(due.chain)}), not ${read.network}.` };
  }
  return null;
}

/** A refused settle (402, or the gate's 403) as an x402 402 challenge. */
function challengeOf(result: Extract<SettleResult, { status: 402 | 403 }>, due: X402Due, sessionId: string): Reply<{ status: 402; body: X402Challenge }> {
  const c = challenge(due, { status: result.body.status, reason_codes: result.body.reason_codes, error_human: result.body.error_human }, sessionId);
  return { response: { status: 402, body: c.body }, headers: c.headers, x402: { required: c.required } };
}

/** A settle outcome in the x402 shape: PAYMENT-RESPONSE on success, a 402 challenge on any refusal. */
export function x402ReplyOf(result: SettleResult, due: X402Due | null, version: X402Version, payer: string, sessionId: string): SettleReply {
  if (result.status === 200) {
    if (!due) return { response: result, headers: {} };
    const reference = result.body.fulfillment.reference;
    return { response: result, headers: paymentResponseHeader(version, due.chain, reference, payer), x402: { settled: settleResponseOf(version, due.chain, reference, payer) } };
  }
  if (result.status === 202 || !due) return { response: result, headers: {} };
  return challengeOf(result, due, sessionId);
}

/** A settle outcome as the paid resource answers it: as x402ReplyOf, with the session named in a 200 or 202. */
function purchaseReplyOf(result: SettleResult, due: X402Due, version: X402Version, payer: string, sessionId: string): PurchaseReply {
  if (result.status === 200) {
    const reference = result.body.fulfillment.reference;
    return {
      response: { status: 200, body: { ...result.body, session_id: sessionId } },
      headers: paymentResponseHeader(version, due.chain, reference, payer),
      x402: { settled: settleResponseOf(version, due.chain, reference, payer) },
    };
  }
  if (result.status === 202) return { response: { status: 202, body: { ...result.body, session_id: sessionId } }, headers: {} };
  return challengeOf(result, due, sessionId);
}

/**
 * GET /m/<merchant>/x402/<sku> (one item) and the MCP `buy` tool (a cart): unpaid, the 402
 * challenge for the cart; paid, a checkout session for it (idempotent on the
 * payment-identifier, else on the authorization nonce) settled by the one settle path
 * (settleSession: gate, engine, receipt, events).
 */
export async function buyItems(ctx: Ctx, m: MerchantRow, input: X402Transport & { prefix: string; items: X402Cart; agentId?: string }): Promise<PurchaseReply> {
  const due = await quoteItems(ctx, m, input.items, input.resourceUrl);
  const read = readTransportPayment(input);
  if (read === null) {
    const c = challenge(due, null);
    return { response: { status: 402, body: c.body }, headers: c.headers, x402: { required: c.required } };
  }
  if (isRefused(read)) return refusal402(due, read.refused, read.human);
  const mismatch = schemeAndNetwork(due, read);
  if (mismatch) return refusal402(due, mismatch.code, mismatch.human);
  const payment = read.payment as Extract<ReadPayment['payment'], { authorization: unknown }>;
  const version: X402Version = input.header?.version ?? read.x402Version ?? 2;
  const paymentHash = canonicalHash(payment);
  const key = read.paymentId ? `x402-pid:${read.paymentId}` : `x402:${payment.authorization.nonce.toLowerCase()}`;

  // A repeat of a payment that already reached a result replays it (even past validBefore).
  const claimedAgent = input.agentId?.toLowerCase() ?? payerAgentId(payment.authorization.from);
  // The agent's session with this key at any merchant (what the checkout below replays), read once; this merchant's is the prior purchase.
  const keyed = NONCE_RE.test(payment.authorization.nonce) ? { prior: await findSessionByAgentKey(ctx.em, claimedAgent, key) } : undefined;
  const prior = keyed?.prior && keyed.prior.merchantId === m.id ? keyed.prior : null;
  if (prior && read.paymentId && prior.payment && canonicalHash(prior.payment) !== paymentHash) {
    throw new ApiError('IDEMPOTENCY_KEY_REUSED', `payment-identifier ${read.paymentId} was already used with a different payment.`);
  }
  const sameItem =
    !!prior && prior.lines.length === input.items.length && input.items.every((i) => prior!.lines.some((l) => l.sku === i.sku && l.qty === i.qty));
  if (!sameItem || prior!.settlePaymentHash !== paymentHash) {
    // The payer anchors the agent id, so it is proven (signer recovery) before anything is
    // written: a forged `from` cannot open sessions or cost anyone reputation.
    const proof = { chain: due.chain, payTo: due.payTo, amountBaseUnits: due.amountBaseUnits, authorization: payment.authorization, signature: payment.signature as Hex };
    const nowSec = unixSeconds(ctx.services.now());
    const checked = await checkProof(proof, nowSec, ctx.services.signers);
    // A smart wallet's signature (EIP-1271 / ERC-6492) proves the payer only on chain: the facilitator's check.
    const proven = checked.ok || !checked.contract ? checked : await facilitatorFor(ctx.services.facilitators, m.livemode).verify(proof, nowSec);
    if (!proven.ok) return refusal402(due, proven.code, proven.human, prior?.id);
  }

  const created = await createCheckout(
    ctx,
    m,
    input.prefix,
    {
      agent_id: claimedAgent,
      items: input.items,
      rail: 'x402',
      idempotency_key: key,
    },
    keyed,
  );
  // The session's own requirement (created just now, or the idempotent session of a repeat): no second read.
  const sessionId = created.session_id;
  const sessionDue: X402Due = { ...due, amountBaseUnits: created.payment_required.amountBaseUnits ?? due.amountBaseUnits };
  const result = await settleSession({ ctx, merchant: m, sessionId, payment, baseUrl: input.baseUrl });
  return purchaseReplyOf(result, sessionDue, version, payment.authorization.from, sessionId);
}

/** The settle route's payment read from its wire format, with the way its outcome is answered; or the answer already. */
type ReadSettle = { reply: SettleReply } | { payment: SettlePayment; answer: (result: SettleResult) => SettleReply };

/**
 * The settle route's wire formats: today's JSON payment, an x402 PaymentPayload in the JSON
 * body, or PAYMENT-SIGNATURE / X-PAYMENT headers. All become one canonical payment; an x402
 * payment (or none, on an open x402 session) answers in x402's shape.
 */
async function readSettlePayment(ctx: Ctx, merchant: SettleMerchantRef, sessionId: string, body: SettleBody | undefined, input: X402Transport): Promise<ReadSettle> {
  let read: ReadPayment | Refused | null = readTransportPayment(input);
  if (read === null && body?.payment) read = canonicalPayment(body.payment);
  const viaX402 = input.header !== null || input.payload !== undefined || (read !== null && !isRefused(read) && read.x402Version !== null);

  if (!viaX402 && read !== null) {
    if (isRefused(read)) return { reply: jsonRefusal(read) };
    return { payment: read.payment, answer: (result) => ({ response: result, headers: {} }) };
  }

  // The x402 answers need the session's requirement first: the merchant and the session are read here.
  const s = await findSession(ctx.em, await merchant.resolve(), sessionId);
  const due: X402Due | null =
    s.rail === 'x402' && s.chain && s.payTo && s.amountBaseUnits
      ? { chain: s.chain, payTo: s.payTo, amountBaseUnits: s.amountBaseUnits, resourceUrl: input.resourceUrl, description: `Checkout session ${s.id}` }
      : null;
  if (read === null) {
    // No payment at all: the x402 challenge for an open x402 session.
    if (!due) throw new ApiError('VALIDATION_FAILED', 'body.payment: Required (this session is on the mock rail: send {"payment":{"mock":true}}).');
    assertPayable(s, ctx.services.now());
    const c = challenge(due, null, s.id);
    return { reply: { response: { status: 402, body: c.body }, headers: c.headers, x402: { required: c.required } } };
  }
  if (isRefused(read)) {
    if (!due) return { reply: jsonRefusal(read) };
    return { reply: refusal402(due, read.refused, read.human, s.id) };
  }
  if (due) {
    const mismatch = schemeAndNetwork(due, read);
    if (mismatch) return { reply: refusal402(due, mismatch.code, mismatch.human, s.id) };
  }
  const version: X402Version = input.header?.version ?? read.x402Version ?? 2;
  const payer = 'authorization' in read.payment ? read.payment.authorization.from : '';
  return { payment: read.payment, answer: (result) => x402ReplyOf(result, due, version, payer, s.id) };
}

/**
 * POST settle with any transport: the wire format read into one payment (readSettlePayment),
 * the workflow run once (settlement's settleSession), its outcome answered in the payer's transport.
 */
export async function settleAnyTransport(ctx: Ctx, merchant: SettleMerchantRef, sessionId: string, body: SettleBody | undefined, input: X402Transport): Promise<SettleReply> {
  const read = await readSettlePayment(ctx, merchant, sessionId, body, input);
  if ('reply' in read) return read.reply;
  return read.answer(await settleSession({ ctx, merchant, sessionId, payment: read.payment, baseUrl: input.baseUrl }));
}
