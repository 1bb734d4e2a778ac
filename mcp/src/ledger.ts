import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmdirSync, statSync, writeFileSync, openSync, fsyncSync, closeSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * One purchase as the ledger counts it, keyed by `<merchant id>/<session id>`:
 * - `signing`: reserved before the authorization is signed; the outcome is not known yet;
 * - `pending`: signed and held for review or settling on chain (counted until resolved);
 * - `spent`: the service accepted the payment;
 * - `void`: the service refused a signed authorization; counted until its `valid_before`,
 *   after which it can no longer move money.
 * An entry counts against the UTC day it was reserved on. A purchase refused before signing
 * leaves no entry.
 */
export type LedgerEntry = {
  day: string;
  amount: string;
  merchant_id: string;
  session_id: string;
  status: 'signing' | 'pending' | 'spent' | 'void';
  /** The signed authorization's validBefore (unix seconds), once signed. */
  valid_before: number | null;
  at: string;
};
type LedgerFile = { version: 1; entries: Record<string, LedgerEntry> };

/** The spending file cannot be read: the wallet refuses to spend (fail closed). */
export class LedgerError extends Error {
  override readonly name = 'LedgerError';
}

export type DayTotals = { day: string; spent: bigint; pending: bigint; used: bigint };
export type ReserveResult = { ok: true } | { ok: false; totals: DayTotals };

const KEEP_DAYS = 31;
const STALE_LOCK_MS = 30_000;

export const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/**
 * The per-day spending record, in a small JSON file shared by every svc-mcp process of this
 * user: each change takes a lock (a directory beside the file), reads, changes and replaces the
 * file atomically (write a temporary file, fsync, rename), so two purchases, in one process or
 * two, never both pass the daily limit.
 */
export class SpendingLedger {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly file: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Reserves `amount` for today when it fits under `maxPerDay`; refuses with today's totals otherwise. */
  reserve(key: string, entry: { amount: bigint; merchant_id: string; session_id: string }, maxPerDay: bigint): Promise<ReserveResult> {
    return this.change((data) => {
      if (data.entries[key]) return { ok: true } as const; // already counted (a re-signed hold)
      const totals = this.totalsOf(data);
      if (totals.used + entry.amount > maxPerDay) return { ok: false, totals } as const;
      const now = this.now();
      data.entries[key] = {
        day: utcDay(now),
        amount: entry.amount.toString(),
        merchant_id: entry.merchant_id,
        session_id: entry.session_id,
        status: 'signing',
        valid_before: null,
        at: now.toISOString(),
      };
      return { ok: true } as const;
    });
  }

  /** The authorization for a reserved purchase is signed, valid until `validBefore`. */
  signed(key: string, validBefore: number): Promise<void> {
    return this.change((data) => {
      const e = data.entries[key];
      if (e) Object.assign(e, { status: 'signing', valid_before: validBefore });
    });
  }

  /**
   * How a signed purchase ended: `spent` (accepted), `pending` (held, settling or unknown),
   * `void` (refused: counted until the authorization expires). A spent entry stays spent.
   */
  settle(key: string, status: 'spent' | 'pending' | 'void'): Promise<void> {
    return this.change((data) => {
      const e = data.entries[key];
      if (e && e.status !== 'spent') e.status = status;
    });
  }

  /** Nothing was signed: the reservation is dropped. */
  release(key: string): Promise<void> {
    return this.change((data) => {
      delete data.entries[key];
    });
  }

  async entry(key: string): Promise<LedgerEntry | undefined> {
    return this.change((data) => data.entries[key]);
  }

  async totals(): Promise<DayTotals> {
    return this.change((data) => this.totalsOf(data));
  }

  private totalsOf(data: LedgerFile): DayTotals {
    const now = this.now();
    const day = utcDay(now);
    const nowSec = Math.floor(now.getTime() / 1000);
    let spent = 0n;
    let pending = 0n;
    for (const e of Object.values(data.entries)) {
      if (e.day !== day) continue;
      if (e.status === 'spent') spent += BigInt(e.amount);
      else if (e.status !== 'void' || (e.valid_before ?? 0) > nowSec) pending += BigInt(e.amount);
    }
    return { day, spent, pending, used: spent + pending };
  }

  /** Runs `fn` on the file's content under the lock, and writes the content back. */
  private change<T>(fn: (data: LedgerFile) => T): Promise<T> {
    const run = this.queue.then(() => this.locked(fn));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async locked<T>(fn: (data: LedgerFile) => T): Promise<T> {
    mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
    const lock = `${this.file}.lock`;
    for (;;) {
      try {
        mkdirSync(lock);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new LedgerError(`cannot lock the spending file ${this.file}: ${(err as Error).message}`);
        // A lock this old belongs to a process that died holding it.
        try {
          if (Date.now() - statSync(lock).mtimeMs > STALE_LOCK_MS) rmdirSync(lock);
        } catch {
          /* another process removed it first */
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    try {
      const before = this.read();
      const data = structuredClone(before);
      const result = fn(data);
      this.prune(data);
      if (JSON.stringify(data) !== JSON.stringify(before)) this.write(data);
      return result;
    } finally {
      rmdirSync(lock);
    }
  }

  private read(): LedgerFile {
    if (!existsSync(this.file)) return { version: 1, entries: {} };
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(this.file, 'utf8'));
    } catch {
      throw new LedgerError(`the spending file ${this.file} is not valid JSON; fix or remove it (removing it forgets today's spending)`);
    }
    const p = parsed as Partial<LedgerFile>;
    if (p?.version !== 1 || typeof p.entries !== 'object' || p.entries === null) {
      throw new LedgerError(`the spending file ${this.file} is not a svc-mcp spending file (version 1)`);
    }
    for (const e of Object.values(p.entries)) {
      if (!/^\d{4}-\d{2}-\d{2}$/.test(String(e?.day)) || !/^\d+$/.test(String(e?.amount))) throw new LedgerError(`the spending file ${this.file} has an unreadable entry`);
    }
    return p as LedgerFile;
  }

  private prune(data: LedgerFile) {
    const oldest = utcDay(new Date(this.now().getTime() - KEEP_DAYS * 86_400_000));
    for (const [k, e] of Object.entries(data.entries)) if (e.day < oldest) delete data.entries[k];
  }

  private write(data: LedgerFile) {
    const tmp = `${this.file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      writeFileSync(tmp, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 });
      const fd = openSync(tmp, 'r');
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, this.file);
    } catch (err) {
      rmSync(tmp, { force: true });
      throw new LedgerError(`cannot write the spending file ${this.file}: ${(err as Error).message}`);
    }
  }
}
