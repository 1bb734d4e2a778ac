import type { DomainProofIo } from './domain.js';

// What this module adds to the process-wide Services (declared in http/context.ts).
declare module '../../http/context.js' {
  interface Services {
    /** Where a merchant's domain proof is looked up (DNS TXT, the https file); tests point them at local servers. */
    domainProof: DomainProofIo;
  }
}
