import { ApiError } from '../../lib/errors.js';
import { checkOutboundUrl } from '../../lib/ssrf.js';

// The address rules live in lib/ssrf.ts, shared with the trusted issuer JWKS fetch.
export { bareHost, ForbiddenAddressError, guardedLookup, isForbiddenAddress } from '../../lib/ssrf.js';

/**
 * Registration rules for a webhook endpoint (lib/ssrf.ts `checkOutboundUrl`): live endpoints
 * are https to a public host (names are checked again on their resolved addresses at every
 * delivery); test endpoints are https anywhere or http to a loopback address. Returns the
 * normalized URL.
 */
export function checkWebhookUrl(raw: string, livemode: boolean): string {
  const checked = checkOutboundUrl(raw, livemode);
  if (!checked.ok) throw new ApiError('WEBHOOK_URL_INVALID', `url: ${checked.why.replace(/^live URLs/, 'live endpoints')}.`);
  return checked.href;
}
