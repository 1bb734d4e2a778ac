import type { EventOutbox } from './service.js';

// What this module adds to the process-wide Services (declared in http/context.ts).
declare module '../../http/context.js' {
  interface Services {
    /** The transactional outbox: `events.record(tx, …)` writes an event and its webhook deliveries. */
    events: EventOutbox;
  }
}
