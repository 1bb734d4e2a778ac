import type { Mailer } from './mail.js';

// What this module adds to the process-wide Services (declared in http/context.ts).
declare module '../../http/context.js' {
  interface Services {
    /** Sign-in mail (SMTP when configured, else the link is logged outside production). */
    mailer: Mailer;
  }
}
