import {
  BaseError,
  createPublicClient,
  encodeFunctionData,
  getAddress,
  http,
  parseSignature,
  toHex,
  type Address,
  type Hex,
  type PublicClient,
} from 'viem';
import { base } from 'viem/chains';
import type { Logger } from '../../lib/logger.js';
import { CHAINS } from '@svc/contract';
import { ApiError } from '../../lib/errors.js';
import { checkProof, type Signers } from '../../lib/eip3009.js';
import { RepeatLimiter } from '../../lib/log-limit.js';
import { ChainGuard, checkChain, type ChainGuardOptions } from '../chain-guard.js';
import {
  USDC_ABI,
  ExecutedAuthorizations,
  chainRead,
  authorizationAt,
  chainSnapshot,
  type ChainSnapshot,
  isRpcUnavailable,
  judgeUsedBeforeUs,
  mapRevert,
  receiptMovesFunds,
  receiptOf,
  revertReason,
  rpcUnavailable,
  usedAuthorizationOutcome,
  usdcBalance,
  usdcBalanceWithin,
} from '../evm-reads.js';
import { judgeAuthorizationOnChain } from '../reconcile.js';
import type {
  BroadcastRecord,
  Facilitator,
  FacilitatorHealth,
  PaymentProof,
  ReconcileInput,
  Refusal,
  SettleOptions,
  SettleOutcome,
  VerifyResult,
} from '../types.js';
import { pickRelayer, Relayer } from './relayer.js';
import { contractCandidate, contractTransaction, contractTransferCalldata, hasCode, simulateDeployAndTransfer, type WalletDeployment } from '../contract-wallets.js';

export type OnchainFacilitatorOptions = {
  /** A broadcast not mined after this long is replaced with bumped fees (same nonce). Default 2500 (one Base block plus margin, so a stuck nonce recovers within 5 s). */
  replaceAfterMs?: number;
  /** How often in-flight transactions are checked. Default 250. */
  pollMs?: number;
  /** Fixed gas limit; unset = the standard limit below when the simulation passes under it, else eth_estimateGas + 25 %. */
  gasLimit?: bigint;
  /**
   * The gas limit a transfer gets when its simulation (an eth_call capped at this much gas)
   * passes: a transaction with this limit then succeeds on the same state. Default 150000 (a
   * USDC transferWithAuthorization uses 60-90k). A heavier one (a contract wallet's signature
   * check) fails under the cap and is estimated instead.
   */
  standardGas?: bigint;
  /** maxFeePerGas = the node's estimate x this percentage. Default 150. */
  feeHeadroomPct?: number;
  /** Replacement fees are at least the previous ones x this percentage (nodes want >= 110). Default 125. */
  replacementBumpPct?: number;
  /** health() is not ok when a relayer holds less gas money than this. Default 0.0005 ETH. */
  minRelayerBalanceWei?: bigint;
  /** Per-request RPC timeout. Default 10000. */
  rpcTimeoutMs?: number;
  /** How far back reconcile searches AuthorizationUsed logs. Default 100000 blocks (about 2.3 days on Base). */
  logLookbackBlocks?: bigint;
  /** How long the chain check (chain id, token code, EIP-712 domain) stands; see ChainGuard. */
  chainCheck?: ChainGuardOptions;
};

export type OnchainFacilitatorConfig = {
  /** Signer recovery for the off-chain checks (services.signers); on the calling thread when absent. */
  signers?: Signers;
  rpcUrl: string;
  privateKeys: Hex[];
  chain: 'base';
  log: Logger;
  /** Factories an ERC-6492 signature may deploy the payer's wallet through (SVC_ERC6492_FACTORIES, lower-case); none when absent. */
  erc6492Factories?: readonly string[];
  options?: OnchainFacilitatorOptions;
};

type Fees = { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };

/** One authorization on its way on chain through one relayer nonce (first broadcast and replacements). */
type Flight = {
  proof: PaymentProof;
  relayer: Relayer;
  nonce: number;
  /** The token, or Multicall3 when the transaction deploys the payer's wallet first (ERC-6492). */
  to: Address;
  data: Hex;
  gas: bigint;
  fees: Fees;
  hashes: Hex[];
  lastSentAt: number;
  record: (rec: BroadcastRecord) => Promise<void>;
  resolve: (o: SettleOutcome) => void;
  outcome: Promise<SettleOutcome>;
  busy: boolean;
};

type SendResult = 'sent' | 'nonce-low' | 'underpriced' | 'unreachable' | { rejected: string };

/** How long verify()'s simulation and gas estimate stand for the settle of the same authorization. */
const ESTIMATE_REUSE_MS = 2_000;
/** When a new broadcast is looked at before the regular poll (ms after the send). */
const EARLY_LOOKS_MS = [0, 15, 50, 120];
/** How long one EIP-1559 fee estimate serves first broadcasts (about a Base block). */
const FEE_CACHE_MS = 1_000;
const maxBig = (...xs: bigint[]) => xs.reduce((a, b) => (b > a ? b : a));

/**
 * Live x402 facilitator that broadcasts transferWithAuthorization itself from a pool of relayer
 * accounts: simulation before any broadcast, a serialized nonce per relayer, local signing,
 * every transaction recorded before it is sent, and stuck transactions replaced with bumped fees
 * by a background monitor that keeps watching every hash of an authorization until one is mined.
 */
export class OnchainFacilitator implements Facilitator {
  // Date.now() in this class only measures elapsed time of I/O (the settle deadline, the fee cache's age, the
  // replacement interval); the application's time comes in as `nowSec` from the injected clock.
  readonly name = 'onchain';
  readonly inProcess = false;
  private readonly client: PublicClient;
  private readonly relayers: Relayer[];
  private readonly token: Address;
  private readonly chainId: number;
  private readonly opts: Required<Omit<OnchainFacilitatorOptions, 'gasLimit' | 'chainCheck'>> & { gasLimit?: bigint };
  private readonly flights = new Set<Flight>();
  private readonly log: Logger;
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  private turn = 0;
  /** The chain as live settlement needs it, checked before anything is signed (cached). */
  private readonly guard: ChainGuard;
  /** Authorizations verify() found carried on chain by someone else, for their settle. */
  private readonly executed = new ExecutedAuthorizations();
  /** The monitor retries every poll: a lasting failure is logged once a minute, with its cause. */
  private readonly watchWarnings = new RepeatLimiter(60_000);

  constructor(private readonly cfg: OnchainFacilitatorConfig) {
    if (cfg.privateKeys.length === 0) throw new Error('OnchainFacilitator needs at least one relayer private key');
    const o = cfg.options ?? {};
    this.opts = {
      replaceAfterMs: o.replaceAfterMs ?? 2500,
      pollMs: o.pollMs ?? 250,
      gasLimit: o.gasLimit,
      standardGas: o.standardGas ?? 150_000n,
      feeHeadroomPct: o.feeHeadroomPct ?? 150,
      replacementBumpPct: Math.max(o.replacementBumpPct ?? 125, 113),
      minRelayerBalanceWei: o.minRelayerBalanceWei ?? 500_000_000_000_000n,
      rpcTimeoutMs: o.rpcTimeoutMs ?? 10_000,
      logLookbackBlocks: o.logLookbackBlocks ?? 100_000n,
    };
    this.log = cfg.log;
    this.chainId = CHAINS[cfg.chain].chainId;
    this.token = getAddress(CHAINS[cfg.chain].usdc);
    this.client = createPublicClient({
      chain: base,
      // Concurrent settles' reads and sends in one tick go as one JSON-RPC batch (one HTTP request,
      // at most 32 calls: providers cap batch sizes).
      transport: http(cfg.rpcUrl, { timeout: this.opts.rpcTimeoutMs, retryCount: 1, batch: { wait: 0, batchSize: 32 } }),
    }) as PublicClient;
    this.relayers = cfg.privateKeys.map((k) => new Relayer(k, this.client));
    this.guard = new ChainGuard(() => checkChain(this.client, cfg.chain), this.log, o.chainCheck);
  }

  /** Relayer addresses (never keys), for logs and tests. */
  get relayerAddresses(): Address[] {
    return this.relayers.map((r) => r.address);
  }

  async verify(proof: PaymentProof, nowSec: number): Promise<VerifyResult> {
    await this.guard.ready();
    if (proof.chain !== this.cfg.chain) {
      return { ok: false, code: 'PAYMENT_SCHEME_UNSUPPORTED', human: `This live facilitator settles only on ${this.cfg.chain}.` };
    }
    const check = await this.checked(proof, nowSec);
    if (!check.ok) return check;
    const p: PaymentProof = check.proof;
    if (check.deploy) {
      // An undeployed wallet (ERC-6492): its deployment and the transfer simulated together.
      const refusal = await simulateDeployAndTransfer(this.client, this.relayers[0]!.address, this.token, check.transfer, check.deploy);
      return refusal ?? { ok: true, proof: p };
    }
    // One chain read when it passes: the transfer's simulation (estimate()) gives its gas limit.
    // The token checks, in its own order, the validity window, the authorization's state, the
    // signature (ECDSA, or a smart wallet's ERC-1271) and the balance, and its revert reason maps
    // to the same codes the broadcast would meet.
    const data = check.transfer;
    try {
      const gas = await this.estimate(data);
      this.remember(data, gas);
      return { ok: true, proof: p };
    } catch (err) {
      if (isRpcUnavailable(err)) throw rpcUnavailable();
      const reason = revertReason(err);
      const refusal = reason ? mapRevert(reason) : { code: 'CAPTURE_FAILED' as const, human: 'The transfer could not be simulated on chain.' };
      if (refusal.code === 'NONCE_ALREADY_USED') {
        // Someone else may have carried this very authorization on chain: then the merchant is paid.
        const judged = await judgeUsedBeforeUs(this.client, this.token, p, this.opts.logLookbackBlocks);
        if (judged.status === 'failed') return { ok: false, code: judged.code, human: judged.human };
        this.executed.remember(p, judged.reference);
        return { ok: true, proof: p };
      }
      if (refusal.code === 'INSUFFICIENT_FUNDS') {
        // worth one more read on the refusal path: the figure the agent needs
        const balance = await usdcBalance(this.client, this.token, p.authorization.from).catch(() => null);
        if (balance !== null) refusal.human = `The payer ${p.authorization.from} holds ${balance} base units of USDC, less than ${p.authorization.value}.`;
      }
      return { ok: false, ...refusal };
    }
  }

  async settle(proof: PaymentProof, opts: SettleOptions): Promise<SettleOutcome> {
    const deadline = Date.now() + opts.waitMs;
    await this.guard.ready();
    if (proof.chain !== this.cfg.chain) {
      return { status: 'failed', code: 'PAYMENT_SCHEME_UNSUPPORTED', human: `This live facilitator settles only on ${this.cfg.chain}.` };
    }
    // The off-chain checks again (the proof may have aged; it comes back canonical), but not
    // verify's chain reads: the gas estimate below is the simulation on chain, and a used nonce,
    // a short balance or a bad signature reverts it with the same codes.
    const check = await this.checked(proof, opts.nowSec);
    if (!check.ok) return { status: 'failed', code: check.code, human: check.human };
    const p = check.proof;
    // verify() found this authorization already carried on chain as signed: nothing to send
    const carried = this.executed.take(p);
    if (carried) return { status: 'settled', reference: carried };
    const relayer = pickRelayer(this.relayers, this.turn++);
    // an undeployed wallet is deployed in the same transaction, before the transfer (Multicall3)
    const { to, data } = contractTransaction(this.token, check.transfer, check.deploy);
    let gas: bigint;
    try {
      // A simulation by verify() moments ago stands (the same calldata, so the same authorization);
      // otherwise the estimate below is the pre-broadcast simulation.
      const recent = this.estimates.get(data);
      this.estimates.delete(data);
      gas = recent && Date.now() - recent.at < ESTIMATE_REUSE_MS ? recent.gas : await this.estimate(data, to);
    } catch (err) {
      if (isRpcUnavailable(err)) throw rpcUnavailable();
      const reason = revertReason(err);
      const m = reason ? mapRevert(reason) : { code: 'CAPTURE_FAILED' as const, human: 'The transfer could not be simulated on chain.' };
      if (m.code === 'NONCE_ALREADY_USED') return judgeUsedBeforeUs(this.client, this.token, p, this.opts.logLookbackBlocks);
      return { status: 'failed', ...m };
    }
    const fees = await this.cachedFees();

    let resolve!: (o: SettleOutcome) => void;
    const outcome = new Promise<SettleOutcome>((r) => (resolve = r));
    const flight: Flight = {
      proof: p,
      relayer,
      nonce: -1,
      to,
      data,
      gas,
      fees,
      hashes: [],
      lastSentAt: Date.now(),
      record: opts.recordBroadcast,
      resolve,
      outcome,
      busy: true,
    };
    relayer.inFlight++;
    let first: SettleOutcome | null;
    try {
      first = await this.firstBroadcast(flight);
    } catch (err) {
      relayer.inFlight--;
      throw err;
    }
    if (first) {
      relayer.inFlight--;
      return first;
    }
    flight.busy = false;
    this.flights.add(flight);
    this.ensureTimer();
    // Automine and fast chains mine at once, though the receipt can lag the send by a few ms:
    // look now and a few times soon rather than a poll interval later (not through tick(), which
    // a pass already under way would skip until the next interval).
    void this.watchSoon(flight);
    const left = deadline - Date.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<SettleOutcome>((resolve) => {
      timer = setTimeout(() => resolve({ status: 'pending', reference: flight.hashes.at(-1) ?? null }), Math.max(left, 0));
    });
    try {
      return await Promise.race([outcome, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** What reconcile's shared first half reads with (rails/reconcile.ts). */
  private get chainReads() {
    return { guard: this.guard, client: this.client, token: this.token, logLookbackBlocks: this.opts.logLookbackBlocks };
  }

  /**
   * Every judgement is made at one block B (chainSnapshot): used at B means settled (or, for a
   * payer who canceled the authorization, failed: usedAuthorizationOutcome); unused
   * and expired at B means it can never move; otherwise a broadcast is dead only if its relayer
   * nonce was consumed by B (the authorization being unused at B, it did not carry it) or it
   * reverted by B. Anything mined after B is judged at the next pass, never released on a
   * mix of older and newer reads.
   */
  async reconcile(input: ReconcileInput): Promise<SettleOutcome> {
    const judged = await judgeAuthorizationOnChain(this.chainReads, input, 'The authorization expired on chain before any transaction carrying it was mined.');
    if ('outcome' in judged) return judged.outcome;
    let alive: Hex | null = null;
    for (const b of input.broadcasts) {
      if (await this.stillAlive(b, judged.openAt)) alive = b.txHash;
    }
    if (alive) return { status: 'pending', reference: alive };
    return { status: 'failed', code: 'CAPTURE_FAILED', human: 'No transaction carrying the authorization can still be mined; it was never sent, reverted or was replaced.' };
  }

  /**
   * For /readyz and the start-up line: the chain check (renewed now, so a fixed chain is seen at
   * once), the block number and each relayer's gas balance; `cause` is one line naming the
   * first problem.
   */
  async usdcBalanceOf(owner: string, timeoutMs: number) {
    return { chain: this.cfg.chain, baseUnits: await usdcBalanceWithin(this.client, this.token, owner, timeoutMs) };
  }

  async health(): Promise<FacilitatorHealth> {
    let relayers: { address: string; balance_wei: string | null; ok: boolean }[] = this.relayers.map((r) => ({ address: r.address, balance_wei: null, ok: false }));
    let blockNumber: string | undefined;
    let readCause: string | undefined;
    const [chain] = await Promise.all([
      this.guard.refresh(),
      chainRead(() => Promise.all([this.client.getBlockNumber(), Promise.all(this.relayers.map((r) => this.client.getBalance({ address: r.address })))])).then(
        ([block, balances]) => {
          blockNumber = block.toString();
          relayers = this.relayers.map((r, i) => ({ address: r.address, balance_wei: balances[i]!.toString(), ok: balances[i]! >= this.opts.minRelayerBalanceWei }));
        },
        (err: unknown) => {
          readCause = err instanceof ApiError ? err.human : String(err);
        },
      ),
    ]);
    const rpc = { ok: chain.chainId === this.chainId, ...(chain.chainId === undefined ? {} : { chainId: chain.chainId }), ...(blockNumber ? { blockNumber } : {}) };
    const poor = relayers.find((r) => r.balance_wei !== null && !r.ok);
    const cause =
      chain.cause ??
      readCause ??
      (poor ? `Relayer ${poor.address} holds ${poor.balance_wei} wei for gas, below SVC_RELAYER_MIN_BALANCE_WEI (${this.opts.minRelayerBalanceWei}).` : undefined);
    const ok = chain.ok && !readCause && relayers.every((r) => r.ok);
    return { ok, detail: { facilitator: 'onchain', chain: this.cfg.chain, rpc, token: chain.token, relayers, ...(cause ? { cause } : {}) } };
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const f of this.flights) f.resolve({ status: 'pending', reference: f.hashes.at(-1) ?? null });
    this.flights.clear();
  }

  /**
   * The off-chain checks, and for a signature that is not `from`'s ECDSA one, a smart wallet's
   * (rails/contract-wallets.ts): the ERC-6492 factory allowlisted, its deployment kept only while
   * the wallet has no code. `transfer` is the token's calldata (the v, r, s overload for an EOA,
   * the bytes overload for a smart wallet).
   */
  private async checked(proof: PaymentProof, nowSec: number): Promise<{ ok: true; proof: PaymentProof; transfer: Hex; deploy: WalletDeployment | null } | Refusal> {
    const check = await checkProof(proof, nowSec, this.cfg.signers);
    if (check.ok) return { ok: true, proof: check.proof, transfer: transferCalldata(check.proof), deploy: null };
    const wallet = contractCandidate(check, this.cfg.erc6492Factories ?? []);
    if (!wallet.ok) return wallet;
    const p = wallet.proof;
    const deployed = await hasCode(this.client, p.authorization.from);
    // no code and nothing to deploy: an EOA, whose ECDSA check already failed (the token's rule too)
    if (!deployed && !wallet.sig.deploy) return { ok: false, code: check.code, human: check.human };
    return { ok: true, proof: p, transfer: contractTransferCalldata(p, wallet.sig.inner), deploy: deployed ? null : wallet.sig.deploy };
  }

  /**
   * The transfer's gas limit, from a simulation that throws the token's revert: the fixed limit;
   * else the standard limit when an eth_call capped at it passes (one execution on the node,
   * where eth_estimateGas runs the transfer several times: 16 of them took anvil 36-128 ms, 16
   * capped calls 4-19 ms); else eth_estimateGas plus 25 %, which also says why a refused one
   * reverts.
   */
  private async estimate(data: Hex, to: Address = this.token): Promise<bigint> {
    const from = this.relayers[0]!.address;
    if (this.opts.gasLimit) {
      // a fixed limit skips the estimate, not the simulation
      await this.client.call({ account: from, to, data });
      return this.opts.gasLimit;
    }
    // The raw calls: viem's call and estimateGas actions prepare a whole transaction request around them.
    try {
      // not retried: any failure goes on to the estimate (which the transport retries once)
      await this.client.request({ method: 'eth_call', params: [{ from, to, data, gas: toHex(this.opts.standardGas) }, 'latest'] }, { retryCount: 0 });
      return this.opts.standardGas;
    } catch {
      // refused under the standard limit: a revert, a heavier transfer, or the node did not answer
    }
    const gas = await this.client.request({ method: 'eth_estimateGas', params: [{ from, to, data }] });
    return (BigInt(gas) * 125n) / 100n;
  }

  /** Estimates made by verify(), by calldata, for the settle that follows it; each used once. */
  private readonly estimates = new Map<Hex, { gas: bigint; at: number }>();
  private remember(data: Hex, gas: bigint): void {
    const now = Date.now();
    // a verify whose settle never came (the gate refused, the agent went away) leaves an entry: drop the stale ones
    if (this.estimates.size >= 256) for (const [k, e] of this.estimates) if (now - e.at >= ESTIMATE_REUSE_MS) this.estimates.delete(k);
    this.estimates.set(data, { gas, at: now });
  }

  /** The node's EIP-1559 estimate with headroom, so a few rising blocks do not strand the transaction. */
  /** First broadcasts within FEE_CACHE_MS share one estimate (replacements always ask the node). */
  private feeCache: { at: number; fees: Promise<Fees> } | null = null;
  private cachedFees(): Promise<Fees> {
    const now = Date.now();
    if (!this.feeCache || now - this.feeCache.at > FEE_CACHE_MS) {
      const fees = this.freshFees();
      this.feeCache = { at: now, fees };
      fees.catch(() => {
        if (this.feeCache?.fees === fees) this.feeCache = null;
      });
    }
    return this.feeCache.fees;
  }

  private async freshFees(): Promise<Fees> {
    const est = await chainRead(() => this.client.estimateFeesPerGas({ chain: null, type: 'eip1559' }));
    const tip = est.maxPriorityFeePerGas;
    const maxFee = (est.maxFeePerGas * BigInt(this.opts.feeHeadroomPct)) / 100n;
    return { maxFeePerGas: maxBig(maxFee, tip), maxPriorityFeePerGas: tip };
  }

  private sign(f: Flight, nonce: number, fees: Fees): Promise<{ hash: Hex; raw: Hex }> {
    return f.relayer.signTransaction({ type: 'eip1559', chainId: this.chainId, nonce, to: f.to, data: f.data, gas: f.gas, value: 0n, ...fees });
  }

  /**
   * Assign a nonce, sign, record, send. Null when the transaction is (probably) with the node;
   * a failed outcome when the node refused it for good. A stale nonce is resynced and retried
   * under a new nonce (the stale one is consumed, so its record can never be mined).
   */
  private async firstBroadcast(f: Flight): Promise<SettleOutcome | null> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const nonce = await f.relayer.assignNonce();
      const { hash, raw } = await this.sign(f, nonce, f.fees);
      try {
        await f.record({ txHash: hash, rawTx: raw, relayer: f.relayer.address, relayerNonce: nonce });
      } catch (err) {
        await f.relayer.releaseNonce(nonce);
        throw err;
      }
      f.nonce = nonce;
      f.hashes.push(hash);
      f.lastSentAt = Date.now();
      const sent = await this.send(raw);
      this.log.info({ relayer: f.relayer.address, relayerNonce: nonce, txHash: hash, result: typeof sent === 'string' ? sent : 'rejected' }, 'onchain facilitator broadcast');
      if (sent === 'sent' || sent === 'unreachable' || sent === 'underpriced') return null;
      if (sent === 'nonce-low') {
        await f.relayer.resync();
        continue;
      }
      await f.relayer.releaseNonce(nonce);
      this.log.warn({ relayer: f.relayer.address, relayerNonce: nonce, txHash: hash, reason: sent.rejected.slice(0, 200) }, 'onchain facilitator broadcast refused');
      return { status: 'failed', code: 'CAPTURE_FAILED', human: 'The chain node refused the settlement transaction; retry shortly.' };
    }
    return { status: 'failed', code: 'CAPTURE_FAILED', human: 'The relayer nonce kept moving under us; retry shortly.' };
  }

  private async send(raw: Hex): Promise<SendResult> {
    try {
      await this.client.request({ method: 'eth_sendRawTransaction', params: [raw] });
      return 'sent';
    } catch (err) {
      if (isRpcUnavailable(err)) return 'unreachable';
      const msg = errorText(err);
      if (/already known|already imported|known transaction|already exists/i.test(msg)) return 'sent';
      if (/nonce too low|nonce has already been used|NonceTooLow/i.test(msg)) return 'nonce-low';
      if (/underpriced|fee too low|replacement/i.test(msg)) return 'underpriced';
      return { rejected: msg };
    }
  }

  private ensureTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.opts.pollMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      await Promise.all([...this.flights].filter((f) => !f.busy).map((f) => this.watch(f)));
    } finally {
      this.ticking = false;
      if (this.flights.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    }
  }

  private finish(f: Flight, o: SettleOutcome): void {
    if (!this.flights.delete(f)) return;
    f.relayer.inFlight--;
    this.log.info({ relayer: f.relayer.address, relayerNonce: f.nonce, status: o.status, reference: 'reference' in o ? o.reference : null, broadcasts: f.hashes.length }, 'onchain facilitator outcome');
    f.resolve(o);
  }

  /** The first looks at a new flight, at EARLY_LOOKS_MS after its broadcast; the interval takes over after. */
  private async watchSoon(f: Flight): Promise<void> {
    const sent = Date.now();
    for (const due of EARLY_LOOKS_MS) {
      const wait = sent + due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (!this.flights.has(f)) return;
      if (f.busy) continue;
      await this.watch(f);
    }
  }

  /** One look at a flight: mined (settled/failed), nonce consumed by another tx, or due for a replacement. */
  private async watch(f: Flight): Promise<void> {
    f.busy = true;
    try {
      const mined = await this.minedOutcome(f);
      if (mined) return this.finish(f, mined);
      if (Date.now() - f.lastSentAt < this.opts.replaceAfterMs) return;
      if ((await f.relayer.minedCount()) > f.nonce) {
        const late = await this.minedOutcome(f);
        return this.finish(f, late ?? (await this.deadOutcome(f)));
      }
      await this.replace(f);
    } catch (err) {
      const cause = err instanceof ApiError ? err.human : errorText(err).slice(0, 200);
      const heldBack = this.watchWarnings.pass(cause);
      if (heldBack !== null) this.log.warn({ relayer: f.relayer.address, relayerNonce: f.nonce, cause, heldBack }, `onchain facilitator watch failed; retrying: ${cause}`);
    } finally {
      f.busy = false;
    }
  }

  private async minedOutcome(f: Flight): Promise<SettleOutcome | null> {
    const receipts = await Promise.all(f.hashes.map((h) => receiptOf(this.client, h)));
    const i = receipts.findIndex((r) => r !== null);
    if (i < 0) return null;
    if (receiptMovesFunds(receipts[i]!, this.token, f.proof)) return { status: 'settled', reference: f.hashes[i]! };
    return this.deadOutcome(f);
  }

  /**
   * Our transaction reverted or its nonce went to another. The authorization reads as used:
   * settled if a transfer carried it (someone else's transaction), failed if the payer canceled
   * it, pending while neither can be shown.
   */
  private async deadOutcome(f: Flight): Promise<SettleOutcome> {
    const at = await chainSnapshot(this.client);
    const state = await authorizationAt(this.client, this.token, f.proof, at);
    if (state === 'used') return usedAuthorizationOutcome(this.client, this.token, f.proof, f.hashes, this.opts.logLookbackBlocks, at);
    if (state === 'expired') {
      return { status: 'failed', code: 'PAYMENT_EXPIRED', human: 'The authorization expired before the transfer was mined.' };
    }
    return { status: 'failed', code: 'CAPTURE_FAILED', human: 'The settlement transaction reverted on chain.' };
  }

  /** Same nonce, fees bumped past the old ones and at least the node's current estimate; recorded before it is sent. */
  private async replace(f: Flight): Promise<void> {
    const fresh = await this.freshFees();
    const bump = BigInt(this.opts.replacementBumpPct);
    const tip = maxBig((f.fees.maxPriorityFeePerGas * bump) / 100n, f.fees.maxPriorityFeePerGas + 1n, fresh.maxPriorityFeePerGas);
    const fees = { maxPriorityFeePerGas: tip, maxFeePerGas: maxBig((f.fees.maxFeePerGas * bump) / 100n, fresh.maxFeePerGas, tip) };
    const { hash, raw } = await this.sign(f, f.nonce, fees);
    await f.record({ txHash: hash, rawTx: raw, relayer: f.relayer.address, relayerNonce: f.nonce });
    f.hashes.push(hash);
    f.fees = fees;
    f.lastSentAt = Date.now();
    const sent = await this.send(raw);
    this.log.info(
      { relayer: f.relayer.address, relayerNonce: f.nonce, txHash: hash, maxFeePerGas: fees.maxFeePerGas.toString(), result: typeof sent === 'string' ? sent : 'rejected' },
      'onchain facilitator replacement',
    );
  }

  /** A recorded transaction that may still be mined; re-sends the exact bytes if the node forgot them. */
  private async stillAlive(b: BroadcastRecord, at: ChainSnapshot): Promise<boolean> {
    if (!b.rawTx || !b.relayer || b.relayerNonce === null) return false;
    // Mined: at or before B it did not move the funds (the authorization is unused at B); after B, judge it next pass.
    const receipt = await receiptOf(this.client, b.txHash);
    if (receipt) return receipt.blockNumber > at.number;
    const mined = await chainRead(() => this.client.getTransactionCount({ address: getAddress(b.relayer!), blockNumber: at.number }));
    if (mined > b.relayerNonce) return false;
    const known = await chainRead(() => this.client.request({ method: 'eth_getTransactionByHash', params: [b.txHash] }));
    if (known) return true;
    const sent = await this.send(b.rawTx);
    return sent === 'sent' || sent === 'unreachable';
  }
}

/** transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, v, r, s) with the canonical signature. */
export function transferCalldata(p: PaymentProof): Hex {
  const a = p.authorization;
  const sig = parseSignature(p.signature);
  return encodeFunctionData({
    abi: USDC_ABI,
    functionName: 'transferWithAuthorization',
    args: [
      getAddress(a.from),
      getAddress(a.to),
      BigInt(a.value),
      BigInt(a.validAfter),
      BigInt(a.validBefore),
      a.nonce as Hex,
      Number(sig.v ?? BigInt(sig.yParity + 27)),
      sig.r,
      sig.s,
    ],
  });
}

/** The node's message without the request URL or body viem appends (they may carry credentials). */
function errorText(err: unknown): string {
  if (err instanceof BaseError) return `${err.shortMessage} ${err.details ?? ''}`.trim();
  return err instanceof Error ? err.message : String(err);
}
