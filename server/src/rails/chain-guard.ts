import { getAddress, type Address, type PublicClient } from 'viem';
import { getEip712Domain } from 'viem/actions';
import { CHAINS, type ChainName } from '@svc/contract';
import { ApiError } from '../lib/errors.js';
import type { Logger } from '../lib/logger.js';
import { chainReadCause, isRpcUnavailable } from './evm-reads.js';

/**
 * What live settlement assumes of the chain behind SVC_RPC_URL_BASE, checked at start, by
 * /readyz and (cached) before a live settle signs or sends anything: the node serves the
 * chain's id, there is a contract at the USDC address, and that token's EIP-712 domain is the
 * one the manifest advertises to agents (their authorizations are signed over it). A fresh dev
 * chain, an RPC URL of another network or another token fails one of these; without the check
 * a settle broadcast a transfer to an empty address (mined, nothing moved).
 */
export type ChainCheck = {
  ok: boolean;
  /** One line naming what is wrong (absent when ok). */
  cause?: string;
  chainId?: number;
  token: { address: Address; code?: boolean; name?: string; version?: string; domainFrom?: 'eip712Domain' | 'name/version' };
  /** The remote facilitator's GET /supported lists the exact scheme on this chain (remote only). */
  supported?: boolean;
  /**
   * Not ok because something did not answer (the chain node, the facilitator's /supported), not
   * because it answered wrong: reported by /readyz, but a settle is not refused on it (its own
   * requests meet the outage, and answer 503 if it lasts).
   */
  unanswered?: boolean;
};

const TOKEN_DOMAIN_ABI = [
  { type: 'function', name: 'name', stateMutability: 'view', inputs: [], outputs: [{ name: '', type: 'string' }] },
  { type: 'function', name: 'version', stateMutability: 'view', inputs: [], outputs: [{ name: '', type: 'string' }] },
] as const;

/**
 * The token's EIP-712 domain: EIP-5267's eip712Domain() when the token has it (the signing
 * domain itself), else name() and version() (FiatToken v2.2, USDC on Base, has no
 * eip712Domain(); its domain separator is built from those two).
 */
async function tokenDomain(
  client: PublicClient,
  token: Address,
): Promise<{ name: string; version: string; chainId?: number; verifyingContract?: Address; from: 'eip712Domain' | 'name/version' } | null> {
  try {
    const d = await getEip712Domain(client, { address: token });
    return { name: d.domain.name, version: d.domain.version, chainId: Number(d.domain.chainId), verifyingContract: d.domain.verifyingContract, from: 'eip712Domain' };
  } catch (err) {
    if (isRpcUnavailable(err)) throw err;
    // no eip712Domain() (it reverts or answers nothing): the two older getters
  }
  try {
    const [name, version] = await Promise.all([
      client.readContract({ address: token, abi: TOKEN_DOMAIN_ABI, functionName: 'name' }),
      client.readContract({ address: token, abi: TOKEN_DOMAIN_ABI, functionName: 'version' }),
    ]);
    return { name, version, from: 'name/version' };
  } catch (err) {
    if (isRpcUnavailable(err)) throw err;
    return null;
  }
}

/** Reads the chain id, the code at the token address and the token's EIP-712 domain; never throws. */
export async function checkChain(client: PublicClient, chain: ChainName): Promise<ChainCheck> {
  const c = CHAINS[chain];
  const token = getAddress(c.usdc);
  const out: ChainCheck = { ok: false, token: { address: token } };
  try {
    out.chainId = await client.getChainId();
    if (out.chainId !== c.chainId) {
      out.cause = `The chain node serves chain id ${out.chainId}, not ${chain} (${c.chainId}): SVC_RPC_URL_BASE points at another network.`;
      return out;
    }
    const code = await client.getCode({ address: token });
    out.token.code = !!code && code !== '0x';
    if (!out.token.code) {
      out.cause = `No contract at the USDC address ${token} on chain ${c.chainId}: the chain node serves a fresh or different chain (SVC_RPC_URL_BASE).`;
      return out;
    }
    const domain = await tokenDomain(client, token);
    if (!domain) {
      out.cause = `The contract at the USDC address ${token} has no EIP-712 name and version: it is not the USDC token agents are told to sign for.`;
      return out;
    }
    Object.assign(out.token, { name: domain.name, version: domain.version, domainFrom: domain.from });
    const advertised = `{name: "${c.domainName}", version: "${c.domainVersion}"}`;
    if (domain.name !== c.domainName || domain.version !== c.domainVersion) {
      out.cause = `The token at ${token} signs with the EIP-712 domain {name: "${domain.name}", version: "${domain.version}"} (${domain.from}), but the manifest advertises ${advertised}: every agent's authorization would be refused on chain.`;
      return out;
    }
    if ((domain.chainId !== undefined && domain.chainId !== c.chainId) || (domain.verifyingContract && getAddress(domain.verifyingContract) !== token)) {
      out.cause = `The token at ${token} reports an EIP-712 domain for chain ${domain.chainId} and contract ${domain.verifyingContract}, not ${c.chainId} and ${token}.`;
      return out;
    }
    out.ok = true;
    return out;
  } catch (err) {
    out.cause = chainReadCause(err);
    out.unanswered = isRpcUnavailable(err);
    return out;
  }
}

export type ChainGuardOptions = {
  /** How long a passing check stands before a settle triggers a re-check in the background. Default 60000. */
  okForMs?: number;
  /** How long a failing check stands before the next settle checks again (and waits for it). Default 5000. */
  failedForMs?: number;
};

/**
 * The live facilitator's cached answer to `checkChain` (and any further check its facilitator
 * adds, such as a remote facilitator's /supported). A settle costs no chain read while the
 * answer is fresh; a passing answer older than `okForMs` is renewed in the background (the
 * settle goes on), a failing one older than `failedForMs` is renewed before the settle is
 * answered, and /readyz renews it every time: fixing the chain is seen without a restart. An
 * answer that failed only because nothing answered (`unanswered`) refuses no settle and is
 * renewed in the background: the settle's own requests meet the outage, or find it over.
 * A change of answer is logged once (the first answer is the start-up line's); a repeat is not.
 * Ages are measured with Date.now(): elapsed time of I/O, not the application's clock.
 */
export class ChainGuard {
  private last: { check: ChainCheck; at: number } | null = null;
  private running: Promise<ChainCheck> | null = null;
  private readonly okForMs: number;
  private readonly failedForMs: number;

  constructor(
    private readonly run: () => Promise<ChainCheck>,
    private readonly log: Logger,
    opts: ChainGuardOptions = {},
  ) {
    this.okForMs = opts.okForMs ?? 60_000;
    this.failedForMs = opts.failedForMs ?? 5_000;
  }

  /** A fresh check (concurrent callers share one). */
  refresh(): Promise<ChainCheck> {
    if (!this.running) {
      this.running = this.run()
        .then((check) => {
          this.record(check);
          return check;
        })
        .finally(() => {
          this.running = null;
        });
    }
    return this.running;
  }

  /** Throws 503 FACILITATOR_UNAVAILABLE naming the cause unless the chain is as live settlement needs it. */
  async ready(): Promise<void> {
    const last = this.last;
    const age = last ? Date.now() - last.at : Infinity;
    if (last && (last.check.ok || last.check.unanswered)) {
      if (age >= (last.check.ok ? this.okForMs : this.failedForMs)) void this.refresh().catch(() => undefined);
      return;
    }
    const check = last && age < this.failedForMs ? last.check : await this.refresh();
    if (!check.ok && !check.unanswered) throw new ApiError('FACILITATOR_UNAVAILABLE', `Live settlement is unavailable: ${check.cause ?? 'the chain check failed.'}`);
  }

  private record(check: ChainCheck): void {
    const before = this.last?.check;
    this.last = { check, at: Date.now() };
    if (!before || (before.ok === check.ok && before.cause === check.cause)) return;
    if (check.ok) this.log.info({ chainId: check.chainId, token: check.token }, 'live facilitator: the chain check passes again; live settles resume');
    else if (check.unanswered) this.log.warn({ chainId: check.chainId }, `live facilitator: ${check.cause} Live settles answer 503 while nothing answers.`);
    else this.log.warn({ chainId: check.chainId, token: check.token }, `live facilitator: live settles answer 503 until this is fixed: ${check.cause}`);
  }
}
