import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { ApiError } from '../../lib/errors.js';

/**
 * Addresses a live endpoint may never reach: private, loopback, link-local, CGNAT,
 * multicast, reserved and documentation ranges. IPv4-mapped IPv6 addresses match
 * the IPv4 entries (BlockList handles the mapping).
 */
const FORBIDDEN = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  FORBIDDEN.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  FORBIDDEN.addSubnet(net, bits, 'ipv6');
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

function family(address: string): 'ipv4' | 'ipv6' | null {
  const v = isIP(address);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : null;
}

/** True for an address a live endpoint must not reach (anything unparsable counts as forbidden). */
export function isForbiddenAddress(address: string): boolean {
  const f = family(address);
  if (!f) return true;
  return FORBIDDEN.check(address, f);
}

function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const f = family(host);
  return f !== null && LOOPBACK.check(host, f);
}

/** URL.hostname keeps IPv6 literals in brackets. */
export function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

const invalid = (why: string) => new ApiError('WEBHOOK_URL_INVALID', `url: ${why}.`);

/**
 * Registration rules. Live: https only, and the host may not be a private, loopback or
 * link-local address, a localhost name or a single-label name (host names are checked
 * again on their resolved addresses at every delivery). Test: https anywhere, or http to
 * a loopback address. Returns the normalized URL.
 */
export function checkWebhookUrl(raw: string, livemode: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid('must be an absolute URL such as https://example.com/webhooks');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalid('must use https');
  if (url.username || url.password) throw invalid('must not contain credentials');
  if (url.hash) throw invalid('must not contain a fragment');
  const host = bareHost(url.hostname);
  if (livemode) {
    if (url.protocol !== 'https:') throw invalid('live endpoints must use https');
    if (isLoopbackHost(host) || host.endsWith('.local') || host.endsWith('.internal')) {
      throw invalid('live endpoints must not target a local host name');
    }
    if (family(host)) {
      if (isForbiddenAddress(host)) throw invalid('live endpoints must not target a private, loopback or link-local address');
    } else if (!host.includes('.')) {
      throw invalid('live endpoints need a fully qualified public host name');
    }
  } else if (url.protocol === 'http:' && !isLoopbackHost(host)) {
    throw invalid('http is only allowed to a loopback address (localhost, 127.0.0.1, [::1]) in test mode; use https');
  }
  return url.href;
}

export class ForbiddenAddressError extends Error {
  readonly code = 'WEBHOOK_ADDRESS_FORBIDDEN';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http.request on live endpoints: resolves every address, refuses the
 * connection if any is forbidden, and hands the checked addresses to the socket so a
 * second resolution cannot swap them (DNS rebinding).
 */
export function guardedLookup(hostname: string, options: { all?: boolean }, callback: LookupCallback): void {
  dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const bad = addresses.find((a) => isForbiddenAddress(a.address));
    if (bad) return callback(new ForbiddenAddressError(`${hostname} resolves to ${bad.address}, a private, loopback or link-local address`), []);
    if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
    if (options.all) return callback(null, addresses);
    const first = addresses[0]!;
    callback(null, first.address, first.family);
  });
}
