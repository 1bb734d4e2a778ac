import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import type { Address } from 'viem';
import { RecoveredSigners, recoverInJavaScript, recoverOnThisThread, type RecoverSigner, type Signers } from './eip3009.js';
import type { Logger } from './logger.js';
import { nativeSecp256k1, nativeSecp256k1Error } from './secp256k1-native.js';

/**
 * Threads a process gives signer recovery when SVC_SIGNER_THREADS is unset: its share of the
 * cores the SVC_WEB_CONCURRENCY request threads leave free, at least one (on 2 cores and one
 * process: 1; a second thread would compete with the request thread and cost ~17 MB).
 */
export function defaultSignerThreads(webConcurrency: number, cores = availableParallelism()): number {
  return Math.max(1, Math.floor((cores - webConcurrency) / webConcurrency));
}

/**
 * A fixed signature (key 0x55…55) the first thread recovers before the pool takes any real
 * work: it proves the worker loads and answers what this thread answers.
 */
const WARM_UP = {
  digest: '0xa60bb8e29f4774d774c7e84f1d58d72c51d667233797e875f27040b892122138',
  signature:
    '0x4ade766523637d197f6c88f82e5effba288368a4c4f4cf06415d45df444b0bf43e5a48671d3244a3b8ff8fb66efdf5957acbe38ffbca9fa0b606dda91e6e05191c',
  signer: '0xe1fAE9b4fAB2F5726677ECfA912d96b0B683e6a9',
} as const;

const IDLE_MS = 30_000;

/**
 * Signer recovery (services.signers), one per process, closed on shutdown (closeServices).
 *
 * - `native`: libsecp256k1's binding (lib/secp256k1-native.ts) on the calling thread, about
 *   0.05 ms a recovery: cheaper than handing the work to a thread. No pool ever starts.
 * - `threads`: where no native binding loads, a piscina pool of worker threads running viem's
 *   recovery steps on the same noble libraries (signer-recovery.worker.mjs). Nothing starts with
 *   the server: the first recovery starts the pool, and until its first thread has answered the
 *   warm-up, recoveries run on the calling thread, so no request waits for a thread to boot. A
 *   pool that fails to start is logged once and recovery stays on this thread.
 * - `this-thread`: no binding and `threads: 0`: viem on the calling thread.
 */
export class SignerRecovery implements Signers {
  private pool: Piscina | null = null;
  private ready = false;
  private closed = false;
  private warming: Promise<void> = Promise.resolve();
  /** The signers this process recovered, by proof (a settle checks one proof twice; lib/eip3009.ts). */
  readonly recovered = new RecoveredSigners();
  /** How this process recovers signers (see the class). */
  readonly mode: 'native' | 'threads' | 'this-thread';

  constructor(
    /** Pool threads when there is no native binding (SVC_SIGNER_THREADS; 0 = none). */
    readonly threads: number,
    private readonly log?: Pick<Logger, 'warn'>,
    /** `native: false` ignores the native binding (tests and benchmarks of the fallback). */
    opts: { native?: boolean } = {},
  ) {
    this.mode = opts.native !== false && nativeSecp256k1() ? 'native' : threads > 0 ? 'threads' : 'this-thread';
  }

  /** Why the native binding is not used (undefined when it is). */
  get nativeUnavailable(): string | undefined {
    return this.mode === 'native' ? undefined : (nativeSecp256k1Error() ?? 'turned off');
  }

  readonly recover: RecoverSigner = (digest, signature) => {
    if (this.mode === 'native') return recoverOnThisThread(digest, signature);
    if (this.mode === 'this-thread' || this.closed) return recoverInJavaScript(digest, signature);
    if (!this.pool) this.start();
    if (!this.ready) return recoverInJavaScript(digest, signature);
    return this.pool!.run({ digest, signature }) as Promise<Address>;
  };

  /** Resolves once the pool takes work (or has failed and stays off); for tests and benchmarks. */
  whenReady(): Promise<void> {
    if (this.mode === 'threads' && !this.pool && !this.closed) this.start();
    return this.warming;
  }

  /** Worker threads running now (0 before the first recovery and after close). */
  get runningThreads(): number {
    return this.pool?.threads.length ?? 0;
  }

  /** Recoveries the threads have answered (the warm-up included). */
  get recoveredInThreads(): number {
    return this.pool?.completed ?? 0;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.ready = false;
    const pool = this.pool;
    this.pool = null;
    await pool?.close({ force: true });
    await this.warming;
  }

  private start() {
    const pool = createPool(this.threads);
    this.pool = pool;
    this.warming = (pool.run({ digest: WARM_UP.digest, signature: WARM_UP.signature }) as Promise<Address>)
      .then((signer) => {
        if (signer !== WARM_UP.signer) throw new Error(`the worker recovered ${signer}, expected ${WARM_UP.signer}`);
        if (!this.closed) this.ready = true;
      })
      .catch((err: unknown) => {
        if (this.closed) return;
        // Off for good: recovery on the request thread is slower, never wrong.
        this.closed = true;
        this.pool = null;
        void pool.close({ force: true }).catch(() => undefined);
        this.log?.warn({ err: err instanceof Error ? err.message : String(err) }, 'signer recovery threads did not start; recovering on the request thread');
      });
  }
}

function createPool(threads: number): Piscina {
  // The task is plain JavaScript (signer-recovery.worker.mjs, emitted beside server/dist by the
  // build, allowJs): threads start without the TypeScript loader this process may run under.
  const filename = fileURLToPath(new URL('./signer-recovery.worker.mjs', import.meta.url));
  return new Piscina({
    filename,
    minThreads: 1,
    maxThreads: threads,
    idleTimeout: IDLE_MS,
    execArgv: workerExecArgv(),
  });
}

/** This process's Node flags without tsx's loader (`--import tsx`, `--require …/tsx/…`). */
function workerExecArgv(): string[] {
  const out: string[] = [];
  const args = process.execArgv;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if ((a === '--import' || a === '--require' || a === '-r' || a === '--loader') && /tsx/.test(args[i + 1] ?? '')) {
      i++;
      continue;
    }
    if (/^--(import|require|loader)=.*tsx/.test(a)) continue;
    out.push(a);
  }
  return out;
}
