import { ApiError } from '../../lib/errors.js';
import { checkOutboundUrl, type OutboundRules } from '../../lib/ssrf.js';

// The address rules live in lib/ssrf.ts, shared with the trusted issuer JWKS fetch.
export { bareHost, ForbiddenAddressError, guardedLookup, isForbiddenAddress, outboundRules } from '../../lib/ssrf.js';

/**
 * Registration rules for a webhook endpoint (lib/ssrf.ts `checkOutboundUrl` under the rules
 * of the endpoint's mode and the configuration, `outboundRules`): https to a public host under
 * the live rules (live endpoints; every endpoint in production); outside production a test
 * endpoint may also be http(s) to a loopback host. Names are checked again on their resolved
 * addresses at every delivery. Returns the normalized URL.
 */
export function checkWebhookUrl(raw: string, rules: OutboundRules): string {
  const checked = checkOutboundUrl(raw, rules);
  if (!checked.ok) throw new ApiError('WEBHOOK_URL_INVALID', `url: ${checked.why}.`);
  return checked.href;
}
