import { randomBytes } from 'node:crypto';
import {
  CHAINS,
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  type CreateRefundBody,
  type ReasonCode,
  type Refund,
  type RefundEventObject,
  type RefundListQuery,
  type RefundReceiptClaims,
  type RefundTypedData,
} from '@svc/contract';
import type { Hex } from 'viem';
import type { Em } from '../../db/orm.js';
import { respondIn, type AuthContext, type AuthedCtx, type Ctx } from '../../http/context.js';
import type { Services } from '../../http/context.js';
import { canonicalSignature, checkAuthorization } from '../../lib/eip3009.js';
import { ApiError, notFound } from '../../lib/errors.js';
import { hasPrefix, newId } from '../../lib/ids.js';
import { fromBaseUnits, placesOf, toBaseUnitsDown } from '../../lib/money.js';
import { unixSeconds } from '../../lib/time.js';
import { facilitatorFor } from '../../rails/index.js';
import type { BroadcastRecord, Facilitator, PaymentProof, SettleOutcome } from '../../rails/types.js';
import { settleRecordingBroadcasts } from './engine.js';
import { signRefundReceipt } from '../gate/index.js';
import { findMerchantByIdOrFail } from '../merchants/index.js';
import { addRefunded, orderById } from '../orders/index.js';
import { receiptKeyOf } from './accepted.js';
import type { RefundRow } from './entity.js';
import {
  addRefund,
  claimDueRefunds,
  extendRefundLease,
  insertRefundTransaction,
  lapsedRefundIds,
  listRefundRows,
  lockRefundRow,
  lockSettledCapture,
  refundById,
  refundTransactions,
  reservedRefundBaseUnits,
} from './store.js';

/**
 * Refunds, settlement's second workflow (docs/settlement.md "Refunds"): a payment with the roles
 * turned round. The merchant's receiving address signs an EIP-3009 transfer back to the payer;
 * the service checks it like a payment proof and carries it through the mode's facilitator.
 *
 * requires_authorization ─authorize─▶ pending ─transfer mined─▶ succeeded
 *        │                               └─transfer did not happen─▶ failed
 *        └─cancel, or the window lapses─▶ canceled
 *
 * The same three phases as a payment attempt: the refund goes `pending` (signature, lease) in one
 * short transaction; the facilitator runs with no transaction open, every transaction it sends
 * stored first (`refund_transactions`); the outcome is written once, by whoever resolves it first
 * (the request or the settlement worker's reconciler).
 */

/** USDC's decimals: refunds convert amounts to base units as checkout does (lib/money). */
const TOKEN_DECIMALS = 6;
/** How long the merchant has to sign: the authorization's validBefore is this far after creation. */
export const REFUND_WINDOW_SECONDS = 600;
/** validAfter sits this far before creation, so a signer's clock a little behind ours still signs a valid authorization. */
const VALID_AFTER_SKEW_SECONDS = 60;
/** A lease past the facilitator's bound, as for payment attempts. */
const LEASE_MARGIN_MS = 5_000;
const PENDING_RECHECK_MS = 1_000;

// ---- presentation ----

function typedDataOf(r: RefundRow): RefundTypedData {
  const c = CHAINS[r.chain];
  return {
    domain: { name: c.domainName, version: c.domainVersion, chainId: c.chainId, verifyingContract: c.usdc },
    types: { TransferWithAuthorization: TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization.map((f) => ({ name: f.name, type: f.type })) },
    primaryType: 'TransferWithAuthorization',
    message: {
      from: r.fromAddress,
      to: r.toAddress,
      value: r.amountBaseUnits,
      validAfter: r.validAfter,
      validBefore: r.validBefore,
      nonce: r.nonce,
    },
  };
}

/** The event object: the refund without its authorization request, in the contract's key order. */
export function presentRefundEvent(r: RefundRow): RefundEventObject {
  return {
    id: r.id,
    order_id: r.orderId,
    merchant_id: r.merchantId,
    status: r.status,
    amount: r.amount,
    amount_base_units: String(r.amountBaseUnits),
    currency: r.currency,
    reason: r.reason ?? null,
    metadata: r.metadata ?? null,
    chain: r.chain,
    transaction: r.status === 'succeeded' ? (r.reference ?? null) : null,
    receipt: r.receiptJws ?? null,
    failure: r.failureCode ? { reason_codes: [r.failureCode], error_human: r.failureHuman ?? '' } : null,
    livemode: r.livemode,
    created_at: r.createdAt.toISOString(),
    updated_at: r.updatedAt.toISOString(),
  };
}

/** The API's refund object (the contract's Refund). */
export function presentRefund(r: RefundRow): Refund {
  const { livemode, created_at, updated_at, ...rest } = presentRefundEvent(r);
  return {
    ...rest,
    authorization_request: r.status === 'requires_authorization' ? { typed_data: typedDataOf(r), next: `POST /v1/refunds/${r.id}/authorize` } : null,
    livemode,
    created_at,
    updated_at,
  };
}

/** The transfer the merchant signs, as a payment proof with the roles turned round: payTo is the payer. */
function proofOf(r: RefundRow, signature: string): PaymentProof {
  return {
    chain: r.chain,
    payTo: r.toAddress,
    amountBaseUnits: String(r.amountBaseUnits),
    authorization: {
      from: r.fromAddress,
      to: r.toAddress,
      value: String(r.amountBaseUnits),
      validAfter: r.validAfter,
      validBefore: r.validBefore,
      nonce: r.nonce,
    },
    signature: signature as Hex,
  };
}

/** The database refused the write: the capture's refunds would pass what it captured (trigger refunds_within_capture). */
function overCapture(err: unknown): boolean {
  return err instanceof Error && err.message.includes('refunds_within_capture');
}

function exceedsRemaining(orderId: string): ApiError {
  return new ApiError('REFUND_EXCEEDS_REMAINING', `The refund would take order ${orderId}'s awaiting, pending and succeeded refunds past what it captured.`);
}

async function scopedRefund(em: Em, auth: AuthContext, id: string, lock: boolean): Promise<RefundRow> {
  if (!hasPrefix(id, 're')) throw notFound('refund');
  const r = lock ? await lockRefundRow(em, id) : await refundById(em, id);
  if (!r || r.projectId !== auth.projectId || r.livemode !== auth.livemode) throw notFound('refund');
  return r;
}

// ---- create ----

/**
 * POST /v1/refunds: a refund of an accepted hosted order paid over x402, awaiting the merchant's
 * signature. The capture is locked first (the lock the trigger takes too), so the default amount
 * (what is left) is read consistently; the limit itself is the trigger's, checked on insert.
 */
export async function createRefund(ctx: AuthedCtx, body: CreateRefundBody): Promise<Refund> {
  const { auth, services } = ctx;
  if (!hasPrefix(body.order_id, 'ord')) throw notFound('order');
  const now = services.now();
  try {
    return await ctx.em.transactional(async (tx) => {
      const order = await orderById(tx, body.order_id);
      if (!order || order.projectId !== auth.projectId || order.livemode !== auth.livemode) throw notFound('order');
      if (order.decision !== 'accept' || order.source !== 'hosted' || !order.settlementAttemptId || !order.total) {
        throw new ApiError(
          'ORDER_NOT_REFUNDABLE',
          order.source === 'ingest'
            ? `Order ${order.id} was reported through ingest: this service did not settle it, so it cannot refund it.`
            : `Order ${order.id} is ${order.decision === 'accept' ? 'accepted without a settlement' : order.decision === 'hold' ? 'held for review' : 'rejected'}: only an accepted, settled order can be refunded.`,
        );
      }
      const capture = await lockSettledCapture(tx, order.settlementAttemptId);
      if (!capture?.proof || !capture.amountBaseUnits || !capture.payer) {
        throw new ApiError('ORDER_NOT_REFUNDABLE', `Order ${order.id} was paid over the ${order.railName} rail: there is no x402 transfer to give back.`);
      }
      const scale = Math.max(2, placesOf(order.total.total));
      let baseUnits: string;
      let amount: string;
      if (body.amount === undefined) {
        const left = BigInt(capture.amountBaseUnits) - BigInt(await reservedRefundBaseUnits(tx, capture.id));
        if (left <= 0n) throw exceedsRemaining(order.id);
        baseUnits = left.toString();
        amount = fromBaseUnits(baseUnits, TOKEN_DECIMALS, scale);
      } else {
        ({ baseUnits, amount } = toBaseUnitsDown(body.amount, TOKEN_DECIMALS, scale));
        if (baseUnits === '0') throw new ApiError('VALIDATION_FAILED', `body.amount: ${body.amount} is less than one base unit of USDC.`);
      }
      const nowSec = unixSeconds(now);
      const r = addRefund(tx, {
        id: newId('re'),
        orderId: order.id,
        settlementAttemptId: capture.id,
        projectId: order.projectId,
        merchantId: order.merchantId,
        livemode: order.livemode,
        status: 'requires_authorization',
        amount,
        amountBaseUnits: baseUnits,
        currency: order.total.currency,
        reason: body.reason ?? null,
        metadata: body.metadata ?? null,
        chain: capture.proof.chain,
        // The address the order was paid to signs; the payer gets the money back.
        fromAddress: capture.proof.payTo,
        toAddress: capture.proof.authorization.from,
        nonce: `0x${randomBytes(32).toString('hex')}`,
        validAfter: nowSec - VALID_AFTER_SKEW_SECONDS,
        validBefore: nowSec + REFUND_WINDOW_SECONDS,
        signature: null,
        facilitator: null,
        reference: null,
        failureCode: null,
        failureHuman: null,
        receiptJws: null,
        leaseUntil: null,
        createdAt: now,
        updatedAt: now,
        resolvedAt: null,
      });
      await tx.flush();
      await services.events.record(tx, { type: 'refund.created', object: presentRefundEvent(r), projectId: r.projectId, merchantId: r.merchantId, livemode: r.livemode, now });
      return respondIn(ctx, tx, 201, presentRefund(r));
    });
  } catch (err) {
    if (overCapture(err)) throw exceedsRemaining(body.order_id);
    throw err;
  }
}

// ---- authorize ----

export type AuthorizeOutcome = { status: 200 | 202; body: Refund };

/**
 * POST /v1/refunds/{id}/authorize. Checked before anything is written or sent (`refuse` answers
 * a refusal): the signature recovers to the authorization's `from` over exactly the stored fields
 * with the payments' canonical rules (lib/eip3009 `checkAuthorization`), the window is open, and
 * the facilitator's own verification passes. Then the three phases.
 */
export async function authorizeRefund(ctx: AuthedCtx, id: string, signature: string): Promise<AuthorizeOutcome> {
  const { auth, services } = ctx;
  const r0 = await scopedRefund(ctx.em, auth, id, false);
  const canonical = /^0x[0-9a-fA-F]{130}$/.test(signature) ? canonicalSignature(signature.toLowerCase() as Hex) : null;
  if (r0.status !== 'requires_authorization') return sameSignatureOrConflict(r0, canonical);

  const nowSec = unixSeconds(services.now());
  const proof = proofOf(r0, signature);
  const check = await checkAuthorization({
    chain: proof.chain,
    payTo: proof.payTo,
    amountBaseUnits: proof.amountBaseUnits,
    auth: proof.authorization,
    signature,
    nowSec,
    signers: services.signers,
  });
  if (!check.ok) return refuse(services, r0, check);
  const facilitator = facilitatorFor(services.facilitators, r0.livemode);
  const verified = await facilitator.verify({ ...proof, authorization: check.authorization, signature: check.signature }, nowSec);
  if (!verified.ok) return refuse(services, r0, verified);

  // Phase 1: pending, with the signature and a lease, in one short transaction.
  const now = services.now();
  const pending = await ctx.em.fork().transactional(async (tx) => {
    const r = await lockRefundRow(tx, r0.id);
    if (!r || r.status !== 'requires_authorization') return null;
    r.status = 'pending';
    r.signature = verified.proof.signature;
    r.facilitator = facilitator.name;
    r.leaseUntil = new Date(now.getTime() + services.config.SVC_SETTLE_WAIT_MS + LEASE_MARGIN_MS);
    r.updatedAt = now;
    await tx.flush();
    // For an Idempotency-Key, the pending answer commits with phase 1 (provisionally; phase 3's
    // answer replaces it): a crash before the transfer's outcome leaves a retry that finds the
    // refund pending, never a key with no answer for a refund that moved on.
    await ctx.idempotency?.completeIn(tx, 202, presentRefund(r), { provisional: true });
    return r;
  });
  if (!pending) {
    // Another authorize (or a cancel) won the row meanwhile.
    const again = await scopedRefund(services.orm.em.fork(), auth, r0.id, false);
    return sameSignatureOrConflict(again, verified.proof.signature);
  }
  return driveRefund(services, pending.id, verified.proof, facilitator, ctx);
}

/**
 * A refusal before anything was sent, as the refund routes answer it. The signature's own checks
 * and the facilitator's verification (its simulation, live) refuse with the payments' codes: a
 * wrong signer or a malformed signature is 422 SIGNER_MISMATCH and the refund stays authorizable
 * (sign again); an expired window cancels it (410); a nonce canceled or spent on chain cancels it
 * (402 NONCE_ALREADY_USED: it can never move); anything else (INSUFFICIENT_FUNDS: fund the wallet)
 * leaves it authorizable with the registry's status.
 */
async function refuse(services: Services, r: RefundRow, refusal: { code: ReasonCode; human: string }): Promise<never> {
  switch (refusal.code) {
    case 'SIGNER_MISMATCH':
    case 'PAYMENT_MALFORMED':
      throw new ApiError('SIGNER_MISMATCH', `${refusal.human.replace(/^payment\./, '')} Sign authorization_request.typed_data with the key of its message.from ${r.fromAddress}.`, {
        status: 422,
      });
    case 'PAYMENT_EXPIRED':
      await cancelInTransaction(services, r.id, 'REFUND_AUTHORIZATION_EXPIRED');
      throw new ApiError('REFUND_AUTHORIZATION_EXPIRED', `The authorization of refund ${r.id} expired (validBefore ${r.validBefore}); the refund is canceled, create a new one.`);
    case 'NONCE_ALREADY_USED':
      await cancelInTransaction(services, r.id, 'NONCE_ALREADY_USED', refusal.human);
      throw new ApiError('NONCE_ALREADY_USED', `${refusal.human} Refund ${r.id} is canceled; create a new one.`);
    default:
      throw new ApiError(refusal.code, refusal.human);
  }
}

/** A refund already past requires_authorization: the same signature answers where it stands; anything else is 409. */
function sameSignatureOrConflict(r: RefundRow, canonical: string | null): AuthorizeOutcome {
  if (canonical && r.signature && r.signature.toLowerCase() === canonical.toLowerCase()) {
    return { status: r.status === 'pending' ? 202 : 200, body: presentRefund(r) };
  }
  throw new ApiError('REFUND_NOT_AUTHORIZABLE', `Refund ${r.id} is ${r.status}: it takes no new authorization.`);
}

/** Stored before the facilitator sends it, by one statement of its own (never inside a transaction with the send). */
async function recordRefundBroadcast(services: Services, refundId: string, rec: BroadcastRecord): Promise<void> {
  await insertRefundTransaction(services.orm.em.fork(), {
    txHash: rec.txHash.toLowerCase(),
    refundId,
    rawTx: rec.rawTx,
    relayer: rec.relayer,
    relayerNonce: rec.relayerNonce,
    createdAt: services.now(),
  });
}

/**
 * Phase 2 and 3 of a refund phase 1 just made pending, like `driveAttempt`: a facilitator throws
 * only when nothing was sent (the refund is authorizable again and the error, 503, reaches the
 * caller); with a transaction stored the refund stays pending for the reconciler.
 */
async function driveRefund(services: Services, refundId: string, proof: PaymentProof, facilitator: Facilitator, ctx?: Ctx): Promise<AuthorizeOutcome> {
  const settled = await settleRecordingBroadcasts(services, facilitator, proof, (rec) => recordRefundBroadcast(services, refundId, rec), { refund: refundId });
  if ('nothingSent' in settled) {
    // Nothing was sent: the refund goes back to awaiting its authorization (sign and send it again).
    await unauthorize(services, refundId);
    const err = settled.nothingSent;
    throw err instanceof ApiError ? err : new ApiError('FACILITATOR_UNAVAILABLE', 'The facilitator could not be reached; nothing was sent. Authorize the refund again.');
  }
  return resolveRefund(services, refundId, settled.outcome, ctx);
}

/** Compensation for a facilitator that refused before sending anything: pending back to requires_authorization. */
async function unauthorize(services: Services, refundId: string): Promise<void> {
  await services.orm.em.fork().transactional(async (tx) => {
    const r = await lockRefundRow(tx, refundId);
    if (!r || r.status !== 'pending') return;
    r.status = 'requires_authorization';
    r.signature = null;
    r.facilitator = null;
    r.leaseUntil = null;
    r.updatedAt = services.now();
    await tx.flush();
  });
}

/**
 * Phase 3: writes the outcome once (whoever resolves the refund first wins; the other reports
 * what is stored). Succeeded: the transaction hash, the signed receipt, the order's
 * amount_refunded and `refund.succeeded`, in one transaction. Failed: the code and `refund.failed`.
 */
export async function resolveRefund(services: Services, refundId: string, outcome: SettleOutcome, ctx?: Ctx): Promise<AuthorizeOutcome> {
  const now = services.now();
  if (outcome.status === 'pending') {
    await extendRefundLease(services.orm.em.fork(), refundId, new Date(now.getTime() + PENDING_RECHECK_MS));
    const r = await refundById(services.orm.em.fork(), refundId);
    return { status: r?.status === 'pending' ? 202 : 200, body: presentRefund(r!) };
  }
  return services.orm.em.fork().transactional(async (tx) => {
    const r = await lockRefundRow(tx, refundId);
    if (!r) throw new Error(`refund ${refundId} not found`);
    if (r.status !== 'pending') return { status: 200 as const, body: presentRefund(r) };
    r.updatedAt = now;
    r.resolvedAt = now;
    r.leaseUntil = null;
    if (outcome.status === 'settled') {
      r.status = 'succeeded';
      r.reference = outcome.reference;
      const m = await findMerchantByIdOrFail(tx, r.merchantId);
      const claims: RefundReceiptClaims = {
        iss: 'svc-checkout',
        sub: r.id,
        iat: unixSeconds(now),
        refundId: r.id,
        orderId: r.orderId,
        merchantId: r.merchantId,
        amount: r.amount,
        amountBaseUnits: String(r.amountBaseUnits),
        currency: r.currency,
        chain: r.chain,
        transaction: outcome.reference,
        livemode: r.livemode,
      };
      r.receiptJws = await signRefundReceipt(await receiptKeyOf(services, m), claims);
      await tx.flush();
      await addRefunded(tx, r.orderId, r.amount);
    } else {
      r.status = 'failed';
      r.failureCode = outcome.code;
      r.failureHuman = outcome.human;
      await tx.flush();
    }
    await services.events.record(tx, {
      type: r.status === 'succeeded' ? 'refund.succeeded' : 'refund.failed',
      object: presentRefundEvent(r),
      projectId: r.projectId,
      merchantId: r.merchantId,
      livemode: r.livemode,
      now,
    });
    const body = presentRefund(r);
    if (ctx) await respondIn(ctx, tx, 200, body);
    return { status: 200 as const, body };
  });
}

// ---- cancel, lapse ----

async function cancelInTransaction(services: Services, refundId: string, code: ReasonCode, human?: string): Promise<RefundRow | null> {
  return services.orm.em.fork().transactional(async (tx) => {
    const r = await lockRefundRow(tx, refundId);
    if (!r || r.status !== 'requires_authorization') return r;
    cancel(r, services.now(), { code, human: human ?? `The authorization window closed (validBefore ${r.validBefore}) without a signature; create a new refund.` });
    await tx.flush();
    return r;
  });
}

/** requires_authorization → canceled; `why` when the service canceled it (window lapsed, nonce spent), none when the merchant did. */
function cancel(r: RefundRow, now: Date, why?: { code: ReasonCode; human: string }) {
  r.status = 'canceled';
  r.updatedAt = now;
  r.resolvedAt = now;
  if (why) {
    r.failureCode = why.code;
    r.failureHuman = why.human;
  }
}

/** POST /v1/refunds/{id}/cancel: only before authorization; canceling a canceled refund answers it again. */
export async function cancelRefund(ctx: AuthedCtx, id: string): Promise<Refund> {
  return ctx.em.transactional(async (tx) => {
    const r = await scopedRefund(tx, ctx.auth, id, true);
    if (r.status === 'requires_authorization') {
      cancel(r, ctx.services.now());
      await tx.flush();
    } else if (r.status !== 'canceled') {
      throw new ApiError('REFUND_NOT_AUTHORIZABLE', `Refund ${r.id} is ${r.status}: only a refund awaiting authorization can be canceled.`);
    }
    return respondIn(ctx, tx, 200, presentRefund(r));
  });
}

// ---- reads ----

export async function getRefund(ctx: AuthedCtx, id: string): Promise<Refund> {
  return presentRefund(await scopedRefund(ctx.em, ctx.auth, id, false));
}

/** Newest first; the cursor is the last refund id of the previous page. */
export async function listRefunds(ctx: AuthedCtx, q: RefundListQuery) {
  if (q.cursor !== undefined && !hasPrefix(q.cursor, 're')) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
  const rows = await listRefundRows(ctx.em, { projectId: ctx.auth.projectId, livemode: ctx.auth.livemode, orderId: q.order_id, beforeId: q.cursor }, q.limit + 1);
  const page = rows.slice(0, q.limit);
  const hasMore = rows.length > q.limit;
  return { data: page.map(presentRefund), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
}

// ---- the settlement worker's part ----

const CLAIM_LEASE_SECONDS = 30;
const RECHECK_MS = 1_000;

/**
 * Pending refunds past their lease (a request that timed out, a crash between phases) are
 * finished by reading the chain through the facilitator's `reconcile`, never by signing anything
 * new; refunds whose window closed unsigned are canceled. Run by the settlement worker.
 */
export async function reconcileRefunds(services: Services, log: Services['log'], batch: number): Promise<void> {
  const claimed = await services.orm.em.fork().transactional((tx) => claimDueRefunds(tx, CLAIM_LEASE_SECONDS, batch));
  for (const id of claimed) {
    const em = services.orm.em.fork();
    const r = await refundById(em, id);
    if (!r || r.status !== 'pending' || !r.signature) continue;
    const facilitator = facilitatorFor(services.facilitators, r.livemode);
    try {
      const broadcasts = (await refundTransactions(em, r.id)).map((t) => ({
        txHash: t.txHash as Hex,
        rawTx: (t.rawTx ?? null) as Hex | null,
        relayer: t.relayer ?? null,
        relayerNonce: t.relayerNonce ?? null,
      }));
      const outcome = await facilitator.reconcile({ proof: proofOf(r, r.signature), broadcasts, nowSec: unixSeconds(services.now()) });
      const result = await resolveRefund(services, r.id, outcome);
      if (result.body.status !== 'pending') log.info({ refund: r.id, outcome: result.body.status }, 'refund reconciled');
    } catch (err) {
      log.warn({ refund: r.id, err: err instanceof Error ? err.message : String(err) }, 'refund reconcile failed; will retry');
      await extendRefundLease(em, r.id, new Date(services.now().getTime() + RECHECK_MS));
    }
  }
  for (const lapsed of await lapsedRefundIds(services.orm.em.fork(), unixSeconds(services.now()), batch)) {
    const r = await cancelInTransaction(services, lapsed, 'REFUND_AUTHORIZATION_EXPIRED');
    if (r?.status === 'canceled') log.info({ refund: r.id }, 'refund authorization window lapsed; canceled');
  }
}
