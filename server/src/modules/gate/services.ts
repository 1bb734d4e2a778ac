import type { IssuerKeySets } from './mandate.js';
import type { ReceiptKeys } from './receipt.js';

// What this module adds to the process-wide caches (Caches, declared in http/context.ts).
declare module '../../http/context.js' {
  interface Caches {
    /** The fetched mandate issuer key sets, by issuer; see mandate.ts. */
    issuerKeys: IssuerKeySets;
    /** Each merchant's receipt signing key, derived once from its stored seed; see receipt.ts. */
    receiptKeys: ReceiptKeys;
  }
}
