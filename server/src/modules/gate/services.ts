import type { IssuerKeySets } from './mandate.js';

// What this module adds to the process-wide caches (Caches, declared in http/context.ts).
declare module '../../http/context.js' {
  interface Caches {
    /** The fetched mandate issuer key sets, by issuer; see mandate.ts. */
    issuerKeys: IssuerKeySets;
  }
}
