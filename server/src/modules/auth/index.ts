/** The auth module's public API: sign-in sessions and device codes (what other modules and the app layer may call). */
export { authenticateSession, installationDefaultProject, normalizeUserCode } from './service.js';
export { Mailer, type SignInMail } from './mail.js';
