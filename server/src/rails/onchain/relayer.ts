import type { Address, PublicClient } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { chainRead } from '../evm-reads.js';

/**
 * One relayer account and its nonce counter. Assignment is serialized through a promise
 * chain, so concurrent settles never share a nonce; broadcasts are pipelined (nobody waits
 * for a receipt before taking the next nonce). The counter only moves up from the chain's
 * `pending` count; a nonce that was assigned but never sent is kept as a hole and reused
 * first, so later transactions are not stuck behind a gap.
 */
export class Relayer {
  readonly address: Address;
  inFlight = 0;
  private next: number | null = null;
  private holes: number[] = [];
  private lock: Promise<unknown> = Promise.resolve();

  constructor(
    readonly account: PrivateKeyAccount,
    private readonly client: PublicClient,
  ) {
    this.address = account.address;
  }

  /** The next nonce to sign with: a hole first, else the counter (read from the chain once). */
  assignNonce(): Promise<number> {
    return this.serialized(async () => {
      const hole = this.holes.shift();
      if (hole !== undefined) return hole;
      if (this.next === null) this.next = await this.pendingCount();
      return this.next++;
    });
  }

  /** A nonce that was assigned but whose transaction never reached the node. */
  releaseNonce(nonce: number): Promise<void> {
    return this.serialized(async () => {
      if (this.next !== null && nonce === this.next - 1) this.next = nonce;
      else if (!this.holes.includes(nonce)) this.holes = [...this.holes, nonce].sort((a, b) => a - b);
    });
  }

  /** After "nonce too low": another sender used this account; move up to the chain's pending count. */
  resync(): Promise<void> {
    return this.serialized(async () => {
      const pending = await this.pendingCount();
      this.next = Math.max(this.next ?? 0, pending);
      this.holes = this.holes.filter((n) => n >= pending);
    });
  }

  /** Nonces below this are mined (or replaced by mined transactions). */
  async minedCount(): Promise<number> {
    return chainRead(() => this.client.getTransactionCount({ address: this.address, blockTag: 'latest' }));
  }

  private pendingCount(): Promise<number> {
    return chainRead(() => this.client.getTransactionCount({ address: this.address, blockTag: 'pending' }));
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }
}

/** Least in-flight first; ties go round robin from a rotating start. */
export function pickRelayer(relayers: Relayer[], turn: number): Relayer {
  let best = relayers[turn % relayers.length]!;
  for (let i = 1; i < relayers.length; i++) {
    const r = relayers[(turn + i) % relayers.length]!;
    if (r.inFlight < best.inFlight) best = r;
  }
  return best;
}
