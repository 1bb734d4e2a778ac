import type { OperatorChannel } from './channel.js';

// What this module adds to the process-wide Services (declared in http/context.ts).
declare module '../../http/context.js' {
  interface Services {
    /** The admin CLI's local channel into this server (opened by main.ts on the embedded database). */
    operator: OperatorChannel;
  }
}
