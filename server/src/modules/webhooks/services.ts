import type { CommitWake } from './wake.js';

// What this module adds to the process-wide Services (declared in http/context.ts).
declare module '../../http/context.js' {
  interface Services {
    /** Wakes this process's delivery workers when a transaction that enqueued deliveries commits. */
    wake: CommitWake;
  }
}
