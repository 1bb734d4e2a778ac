import type { RefModes } from './settle.js';

// What this module adds to the process-wide caches (Caches, declared in http/context.ts).
declare module '../../http/context.js' {
  interface Caches {
    /** The mode each merchant reference of a settle URL named when last read: a hint of the path to try first; see settle.ts. */
    settleRefModes: RefModes;
  }
}
