import { HTTPFacilitatorClient } from '@x402/core/http';
import { SettleError, VerifyError, type PaymentPayload, type PaymentRequirements, type SettleResponse } from '@x402/core/types';
import { createPublicClient, getAddress, http, type Address, type Hex, type PublicClient } from 'viem';
import { base } from 'viem/chains';
import type { ReasonCode } from '@svc/contract';
import { ApiError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { CHAINS } from '@svc/contract';
import { checkProof, type Signers } from '../lib/eip3009.js';
import { ChainGuard, checkChain, type ChainCheck, type ChainGuardOptions } from './chain-guard.js';
import { ExecutedAuthorizations, authorizationAt, chainSnapshot, judgeUsedBeforeUs, usdcBalanceWithin, usedAuthorizationOutcome } from './evm-reads.js';
import { judgeAuthorizationOnChain } from './reconcile.js';
import { contractCandidate, hasCode } from './contract-wallets.js';
import type { Facilitator, FacilitatorHealth, PaymentProof, ReconcileInput, SettleOptions, SettleOutcome, VerifyResult } from './types.js';

export type RemoteFacilitatorOptions = {
  /** Per-request timeout of /verify and /supported. Default 10000. */
  requestTimeoutMs?: number;
  /** Attempts for the idempotent calls (/verify, /supported). Default 2. */
  attempts?: number;
  /** maxTimeoutSeconds sent in the requirements. Default 60. */
  maxTimeoutSeconds?: number;
  /** How far back reconcile searches AuthorizationUsed logs. Default 100000 blocks. */
  logLookbackBlocks?: bigint;
  /** How long the readiness check (the chain through our RPC, the facilitator's /supported) stands; see ChainGuard. */
  chainCheck?: ChainGuardOptions;
};

export type RemoteFacilitatorConfig = {
  /** Signer recovery for the off-chain checks (services.signers); on the calling thread when absent. */
  signers?: Signers;
  /** Base URL of an x402 v2 facilitator (POST /verify, POST /settle, GET /supported). */
  url: string;
  /** One header sent on every call, e.g. { name: 'Authorization', value: 'Bearer x' }. */
  authHeader?: { name: string; value: string };
  /** The chain node reconcile reads (authorization state, receipts, logs). */
  rpcUrl: string;
  log: Logger;
  chain?: 'base';
  /** Factories an ERC-6492 signature may deploy the payer's wallet through (SVC_ERC6492_FACTORIES, lower-case); none when absent. */
  erc6492Factories?: readonly string[];
  options?: RemoteFacilitatorOptions;
};

const X402_VERSION = 2;

/** x402 facilitator reason strings (@x402/evm exact scheme, older spellings too) to our codes. */
export function mapX402Reason(reason: string | undefined): { code: ReasonCode; human: string } {
  const r = (reason ?? '').toLowerCase();
  const safe = r.replace(/[^a-z0-9_]/g, '').slice(0, 80) || 'unknown';
  if (/nonce/.test(r)) return { code: 'NONCE_ALREADY_USED', human: 'The authorization nonce was already used on chain; sign a new authorization.' };
  if (/insufficient_(funds|balance)/.test(r)) return { code: 'INSUFFICIENT_FUNDS', human: 'The payer does not hold enough USDC for this authorization.' };
  if (/valid_before|expired/.test(r)) return { code: 'PAYMENT_EXPIRED', human: 'The authorization expires too soon or has expired (validBefore).' };
  if (/valid_after/.test(r)) return { code: 'PAYMENT_NOT_YET_VALID', human: 'The authorization is not yet valid (validAfter).' };
  if (/signature/.test(r)) return { code: 'SIGNER_MISMATCH', human: 'The facilitator refused the signature; sign the EIP-712 typed data again.' };
  if (/recipient_mismatch/.test(r)) return { code: 'PAYMENT_RECIPIENT_MISMATCH', human: "authorization.to must be the merchant's payTo." };
  if (/value_mismatch|authorization_value|amount/.test(r)) return { code: 'PAYMENT_AMOUNT_MISMATCH', human: 'authorization.value must be exactly the amount due.' };
  if (/network_mismatch|unsupported|invalid_exact_evm_scheme/.test(r)) {
    return { code: 'PAYMENT_SCHEME_UNSUPPORTED', human: 'The facilitator does not settle this scheme or network.' };
  }
  return { code: 'CAPTURE_FAILED', human: `The facilitator could not capture the payment (${safe}).` };
}

/** Our proof as an x402 v2 exact-scheme payload and requirements. */
export function toX402(proof: PaymentProof, maxTimeoutSeconds: number): { payload: PaymentPayload; requirements: PaymentRequirements } {
  const c = CHAINS[proof.chain];
  const a = proof.authorization;
  const requirements: PaymentRequirements = {
    scheme: 'exact',
    network: `eip155:${c.chainId}`,
    amount: proof.amountBaseUnits,
    asset: getAddress(c.usdc),
    payTo: getAddress(proof.payTo.toLowerCase()),
    maxTimeoutSeconds,
    extra: { name: c.domainName, version: c.domainVersion },
  };
  const payload: PaymentPayload = {
    x402Version: X402_VERSION,
    accepted: requirements,
    payload: {
      authorization: { from: a.from, to: a.to, value: a.value, validAfter: String(a.validAfter), validBefore: String(a.validBefore), nonce: a.nonce },
      signature: proof.signature,
    },
  };
  return { payload, requirements };
}

const isHash = (t: unknown): t is Hex => typeof t === 'string' && /^0x[0-9a-fA-F]{64}$/.test(t);

/** True when the request provably never reached the facilitator (safe to report 503: nothing was sent). */
function neverSent(err: unknown): boolean {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  const text = `${err instanceof Error ? err.message : ''} ${cause?.code ?? ''} ${cause?.message ?? ''}`;
  return /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|bad port/.test(text);
}

/** A 4xx without a settle body (bad auth, bad request): the facilitator refused before doing anything. */
function refusedRequest(err: unknown): boolean {
  const m = /failed \((\d{3})\)/.exec(err instanceof Error ? err.message : '');
  return m !== null && m[1]!.startsWith('4');
}

/**
 * Live x402 facilitator reached over the x402 facilitator HTTP API v2 (through @x402/core's
 * HTTPFacilitatorClient). /verify and /supported are retried; /settle never is: after a
 * send whose answer we did not get, the outcome is `pending` and reconcile reads the chain.
 */
export class RemoteFacilitator implements Facilitator {
  readonly name = 'remote';
  readonly inProcess = false;
  private readonly client: PublicClient;
  private readonly token: Address;
  private readonly chain: 'base';
  private readonly opts: Required<Omit<RemoteFacilitatorOptions, 'chainCheck'>>;
  /** Our chain node and the facilitator as live settlement needs them, checked before a settle calls out (cached). */
  private readonly guard: ChainGuard;
  /** Authorizations verify() found carried on chain already, for their settle (no /settle that can only fail). */
  private readonly executed = new ExecutedAuthorizations();

  constructor(private readonly cfg: RemoteFacilitatorConfig) {
    const o = cfg.options ?? {};
    this.opts = {
      requestTimeoutMs: o.requestTimeoutMs ?? 10_000,
      attempts: Math.max(1, o.attempts ?? 2),
      maxTimeoutSeconds: o.maxTimeoutSeconds ?? 60,
      logLookbackBlocks: o.logLookbackBlocks ?? 100_000n,
    };
    this.chain = cfg.chain ?? 'base';
    this.token = getAddress(CHAINS[this.chain].usdc);
    this.client = createPublicClient({ chain: base, transport: http(cfg.rpcUrl, { timeout: 10_000, retryCount: 1 }) }) as PublicClient;
    this.guard = new ChainGuard(() => this.readiness(), cfg.log, o.chainCheck);
  }

  /**
   * Our chain node (the reconciler and the front-run check judge payments there, so it must
   * serve the chain and token the manifest advertises) and the facilitator's GET /supported
   * (it must list the exact scheme on this chain). What the facilitator's own node serves is
   * not visible from here: its /verify simulates on it.
   */
  private async readiness(): Promise<ChainCheck> {
    const network = `eip155:${CHAINS[this.chain].chainId}`;
    const [chain, supported] = await Promise.all([
      checkChain(this.client, this.chain),
      (async (): Promise<{ ok: true } | { ok: false; cause: string; unanswered: boolean }> => {
        for (let attempt = 1; attempt <= this.opts.attempts; attempt++) {
          try {
            const s = await this.http(this.opts.requestTimeoutMs).getSupported();
            if (s.kinds.some((k) => k.scheme === 'exact' && k.network === network)) return { ok: true };
            return { ok: false, unanswered: false, cause: `The remote facilitator does not list the exact scheme on ${network} (GET /supported).` };
          } catch (err) {
            if (refusedRequest(err)) {
              const status = /failed \((\d{3})\)/.exec((err as Error).message)?.[1];
              return { ok: false, unanswered: false, cause: `The remote facilitator refused GET /supported (${status}): check SVC_FACILITATOR_AUTH_HEADER.` };
            }
          }
        }
        return { ok: false, unanswered: true, cause: 'The remote facilitator did not answer GET /supported.' };
      })(),
    ]);
    const out: ChainCheck = { ...chain, supported: supported.ok };
    if (chain.ok && !supported.ok) Object.assign(out, { ok: false, cause: supported.cause, unanswered: supported.unanswered });
    return out;
  }

  private http(timeoutMs: number): HTTPFacilitatorClient {
    const h = this.cfg.authHeader;
    const headers = h ? { [h.name]: h.value } : {};
    return new HTTPFacilitatorClient({
      url: this.cfg.url,
      timeoutMs: Math.max(1, Math.round(timeoutMs)),
      ...(h ? { createAuthHeaders: async () => ({ verify: headers, settle: headers, supported: headers }) } : {}),
    });
  }

  /**
   * Shared off-chain checks; the canonical proof, or the refusal. A smart wallet's signature
   * (ERC-1271, ERC-6492 through an allowed factory) goes to the facilitator as sent: its /verify
   * simulates the token's bytes overload, and its /settle deploys a counterfactual wallet first.
   */
  private async precheck(proof: PaymentProof, nowSec: number): Promise<VerifyResult> {
    if (proof.chain !== this.chain) {
      return { ok: false, code: 'PAYMENT_SCHEME_UNSUPPORTED', human: `This live facilitator settles only on ${this.chain}.` };
    }
    const check = await checkProof(proof, nowSec, this.cfg.signers);
    if (check.ok) return check;
    const wallet = contractCandidate(check, this.cfg.erc6492Factories ?? []);
    if (!wallet.ok) return wallet;
    // no code and nothing to deploy: an EOA, whose ECDSA check already failed (the token's rule too)
    if (!wallet.sig.deploy && !(await hasCode(this.client, proof.authorization.from))) return { ok: false, code: check.code, human: check.human };
    return { ok: true, proof: wallet.proof };
  }

  async verify(proof: PaymentProof, nowSec: number): Promise<VerifyResult> {
    await this.guard.ready();
    const pre = await this.precheck(proof, nowSec);
    if (!pre.ok) return pre;
    const { payload, requirements } = toX402(pre.proof, this.opts.maxTimeoutSeconds);
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await this.http(this.opts.requestTimeoutMs).verify(payload, requirements);
        if (res.isValid) return pre;
        return this.refused(pre.proof, res.invalidReason);
      } catch (err) {
        if (err instanceof VerifyError) return this.refused(pre.proof, err.invalidReason);
        this.cfg.log.warn({ attempt, err: err instanceof Error ? err.name : 'error' }, 'remote facilitator /verify failed');
        if (attempt >= this.opts.attempts) throw new ApiError('FACILITATOR_UNAVAILABLE', 'The remote facilitator did not answer; retry shortly.');
      }
    }
  }

  /**
   * The facilitator's /verify refused. A used nonce may be this very authorization carried on
   * chain by someone else (the facilitator's simulation only sees "used"): our node judges it,
   * and if the merchant was paid exactly as signed the proof is good and its settle takes that
   * transaction.
   */
  private async refused(p: PaymentProof, reason: string | undefined): Promise<VerifyResult> {
    const refusal = mapX402Reason(reason);
    if (refusal.code !== 'NONCE_ALREADY_USED') return { ok: false, ...refusal };
    const judged = await judgeUsedBeforeUs(this.client, this.token, p, this.opts.logLookbackBlocks);
    if (judged.status === 'failed') return { ok: false, code: judged.code, human: judged.human };
    this.executed.remember(p, judged.reference);
    return { ok: true, proof: p };
  }

  async settle(proof: PaymentProof, opts: SettleOptions): Promise<SettleOutcome> {
    await this.guard.ready();
    const pre = await this.precheck(proof, opts.nowSec);
    if (!pre.ok) return { status: 'failed', code: pre.code, human: pre.human };
    const p = pre.proof;
    // verify() found it carried on chain already: a /settle could only fail (or broadcast a transaction that reverts)
    const carried = this.executed.take(p);
    if (carried) return { status: 'settled', reference: carried };
    const { payload, requirements } = toX402(p, this.opts.maxTimeoutSeconds);
    let res: SettleResponse;
    try {
      res = await this.http(opts.waitMs).settle(payload, requirements);
    } catch (err) {
      if (err instanceof SettleError) {
        res = { success: false, errorReason: err.errorReason, transaction: err.transaction, network: err.network };
      } else if (neverSent(err) || refusedRequest(err)) {
        throw new ApiError('FACILITATOR_UNAVAILABLE', 'The remote facilitator is unreachable; retry shortly.');
      } else {
        // sent, answer lost or late: the facilitator may have broadcast; the reconciler reads the chain
        this.cfg.log.warn({ err: err instanceof Error ? err.name : 'error' }, 'remote facilitator /settle gave no answer; pending');
        return { status: 'pending', reference: null };
      }
    }
    const tx = isHash(res.transaction) ? res.transaction : null;
    if (tx) await opts.recordBroadcast({ txHash: tx, rawTx: null, relayer: null, relayerNonce: null });
    if (res.success && tx) return { status: 'settled', reference: tx };
    if (res.success || res.errorReason === 'settlement_pending') return { status: 'pending', reference: tx };
    if (tx) {
      // a failure after a broadcast: the chain is the judge (another transaction may carry the authorization)
      const at = await chainSnapshot(this.client);
      if ((await authorizationAt(this.client, this.token, p, at)) === 'used') return usedAuthorizationOutcome(this.client, this.token, p, [tx], this.opts.logLookbackBlocks, at);
    }
    const refusal = mapX402Reason(res.errorReason);
    // refused before any broadcast for a used nonce: someone else may have carried this authorization
    if (refusal.code === 'NONCE_ALREADY_USED') return judgeUsedBeforeUs(this.client, this.token, p, this.opts.logLookbackBlocks);
    return { status: 'failed', ...refusal };
  }

  /** What reconcile's shared first half reads with (rails/reconcile.ts). */
  private get chainReads() {
    return { guard: this.guard, client: this.client, token: this.token, logLookbackBlocks: this.opts.logLookbackBlocks };
  }

  async reconcile(input: ReconcileInput): Promise<SettleOutcome> {
    const judged = await judgeAuthorizationOnChain(this.chainReads, input, 'The authorization expired on chain without being used.');
    if ('outcome' in judged) return judged.outcome;
    return { status: 'pending', reference: input.broadcasts.at(-1)?.txHash ?? null };
  }

  /** For /readyz and the start-up line: the readiness check renewed now; `cause` names the first problem. */
  async usdcBalanceOf(owner: string, timeoutMs: number) {
    return { chain: this.chain, baseUnits: await usdcBalanceWithin(this.client, this.token, owner, timeoutMs) };
  }

  async health(): Promise<FacilitatorHealth> {
    const [check, blockNumber] = await Promise.all([this.guard.refresh(), this.client.getBlockNumber().then(String, () => undefined)]);
    const rpc = { ok: check.chainId === CHAINS[this.chain].chainId, ...(check.chainId === undefined ? {} : { chainId: check.chainId }), ...(blockNumber ? { blockNumber } : {}) };
    return {
      ok: check.ok,
      detail: { facilitator: 'remote', url: safeOrigin(this.cfg.url), supported: check.supported ?? false, rpc, token: check.token, ...(check.cause ? { cause: check.cause } : {}) },
    };
  }

  async close(): Promise<void> {}
}

/** scheme://host[:port] only: never the path, query or credentials of the configured URL. */
function safeOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'invalid-url';
  }
}

