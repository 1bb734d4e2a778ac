/**
 * Lets a repeated warning through once per window for each key (its cause); the next one let
 * through says how many were held back. For loops that retry every fraction of a second (the
 * onchain facilitator's monitor, the settlement reconciler): the log names a lasting cause
 * once a window, not four times a second. Windows are measured with Date.now() (elapsed time,
 * not the application's clock).
 */
export class RepeatLimiter {
  private readonly seen = new Map<string, { at: number; held: number }>();

  constructor(
    private readonly windowMs: number,
    private readonly maxKeys = 256,
  ) {}

  /** Null: hold this one back. A number: log it, noting that many held back since the last one logged. */
  pass(key: string): number | null {
    const now = Date.now();
    const e = this.seen.get(key);
    if (e && now - e.at < this.windowMs) {
      e.held += 1;
      return null;
    }
    if (!e && this.seen.size >= this.maxKeys) this.seen.delete(this.seen.keys().next().value!);
    this.seen.set(key, { at: now, held: 0 });
    return e?.held ?? 0;
  }
}
