import type { AgentReadCache } from './cache.js';

// What this module adds to the process-wide caches (Caches, declared in http/context.ts).
declare module '../../http/context.js' {
  interface Caches {
    /** The agent read path's cache (manifest, catalog, key set, host routing); see cache.ts. */
    agent: AgentReadCache;
  }
}
