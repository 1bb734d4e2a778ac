import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP } from 'node:net';

/**
 * The one outbound-URL guard (webhook endpoints, trusted issuer JWKS): which URLs a merchant
 * may register, and which addresses the service may connect to on a live merchant's behalf.
 * Checked when the URL is written and again at connect time on every resolved address.
 */

/** IPv4 ranges a live outbound request may never reach: private, loopback, link-local, CGNAT, multicast, reserved, documentation. */
const FORBIDDEN_V4 = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  FORBIDDEN_V4.addSubnet(net, bits, 'ipv4');
}

/**
 * IPv6 ranges refused whole: unspecified, loopback and the deprecated IPv4-compatible block
 * (::/96), NAT64 (64:ff9b::/96, 64:ff9b:1::/48: the gateway reaches IPv4 for us), discard,
 * documentation, ULA, link-local, site-local, multicast.
 */
const FORBIDDEN_V6 = new BlockList();
for (const [net, bits] of [
  ['::', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  FORBIDDEN_V6.addSubnet(net, bits, 'ipv6');
}

/** The 16 bytes of an IPv6 address (zone id dropped, embedded dotted quad allowed); null if unparsable. */
function ipv6Bytes(address: string): number[] | null {
  let a = address.split('%')[0]!;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (v4) {
    const parts = v4[1]!.split('.').map(Number);
    if (parts.some((p) => p > 255)) return null;
    a = a.slice(0, -v4[1]!.length) + `${((parts[0]! << 8) | parts[1]!).toString(16)}:${((parts[2]! << 8) | parts[3]!).toString(16)}`;
  }
  const halves = a.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  const bytes: number[] = [];
  for (const g of groups) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return null;
    const n = parseInt(g, 16);
    bytes.push(n >> 8, n & 0xff);
  }
  return bytes;
}

const dotted = (b: number[]) => b.join('.');

/**
 * IPv4 addresses an IPv6 address carries and that a packet to it would end up reaching:
 * IPv4-mapped (::ffff:a.b.c.d), 6to4 (2002:AABB:CCDD::/16) and Teredo (2001::/32: server
 * and obfuscated client address).
 */
function embeddedV4(b: number[]): string[] {
  const zero = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zero(0, 10) && b[10] === 0xff && b[11] === 0xff) return [dotted(b.slice(12, 16))];
  if (b[0] === 0x20 && b[1] === 0x02) return [dotted(b.slice(2, 6))];
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0 && b[3] === 0) return [dotted(b.slice(4, 8)), dotted(b.slice(12, 16).map((x) => x ^ 0xff))];
  return [];
}

/** True for an address a live outbound request must not reach (anything unparsable counts as forbidden). */
export function isForbiddenAddress(address: string): boolean {
  const v = isIP(address);
  if (v === 4) return FORBIDDEN_V4.check(address, 'ipv4');
  if (v !== 6) return true;
  const bytes = ipv6Bytes(address);
  if (!bytes) return true;
  try {
    if (FORBIDDEN_V6.check(address.split('%')[0]!, 'ipv6')) return true;
  } catch {
    return true;
  }
  return embeddedV4(bytes).some((v4) => FORBIDDEN_V4.check(v4, 'ipv4'));
}

/** URL.hostname keeps IPv6 literals in brackets, and a fully qualified name may end in a dot. */
export function bareHost(hostname: string): string {
  if (hostname.startsWith('[') && hostname.endsWith(']')) return hostname.slice(1, -1);
  return hostname.replace(/\.+$/, '').toLowerCase();
}

function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const v = isIP(host);
  if (v === 4) return host.startsWith('127.');
  if (v === 6) {
    const b = ipv6Bytes(host);
    if (!b) return false;
    if (b.slice(0, 15).every((x) => x === 0) && b[15] === 1) return true;
    return embeddedV4(b).some((a) => a.startsWith('127.'));
  }
  return false;
}

export type OutboundUrlCheck = { ok: true; href: string } | { ok: false; why: string };

/**
 * Registration rules for a URL the service will call. Live: https only, and the host may not
 * be a private, loopback or link-local address (also when embedded in IPv6), a localhost,
 * .local or .internal name (trailing dots ignored) or a single-label name; names are checked
 * again on their resolved addresses at connect time. Test: https anywhere, or http to a
 * loopback host. Returns the normalized URL or why it is refused.
 */
export function checkOutboundUrl(raw: string, livemode: boolean): OutboundUrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, why: 'must be an absolute URL such as https://example.com/path' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { ok: false, why: 'must use https' };
  if (url.username || url.password) return { ok: false, why: 'must not contain credentials' };
  if (url.hash) return { ok: false, why: 'must not contain a fragment' };
  const host = bareHost(url.hostname);
  if (livemode) {
    if (url.protocol !== 'https:') return { ok: false, why: 'live URLs must use https' };
    if (isLoopbackHost(host) || host.endsWith('.local') || host.endsWith('.internal')) {
      return { ok: false, why: 'live URLs must not target a local host name' };
    }
    if (isIP(host)) {
      if (isForbiddenAddress(host)) return { ok: false, why: 'live URLs must not target a private, loopback or link-local address' };
    } else if (!host.includes('.')) {
      return { ok: false, why: 'live URLs need a fully qualified public host name' };
    }
  } else if (url.protocol === 'http:' && !isLoopbackHost(host)) {
    return { ok: false, why: 'http is only allowed to a loopback address (localhost, 127.0.0.1, [::1]) in test mode; use https' };
  }
  return { ok: true, href: url.href };
}

export class ForbiddenAddressError extends Error {
  readonly code = 'WEBHOOK_ADDRESS_FORBIDDEN';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
export type Resolver = (hostname: string, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

const systemResolver: Resolver = (hostname, callback) => dnsLookup(hostname, { all: true, verbatim: true }, callback);

/**
 * A `lookup` for http.request on restricted requests: resolves every address, refuses the
 * connection if any is forbidden, and hands the checked addresses to the socket so a second
 * resolution cannot swap them (DNS rebinding). `resolve` is the system resolver unless a test
 * injects one.
 */
export function guardedLookupWith(resolve: Resolver) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    resolve(hostname, (err, addresses) => {
      if (err) return callback(err, []);
      const bad = addresses.find((a) => isForbiddenAddress(a.address));
      if (bad) return callback(new ForbiddenAddressError(`${hostname} resolves to ${bad.address}, a private, loopback or link-local address`), []);
      if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

export const guardedLookup = guardedLookupWith(systemResolver);

/** A `lookup` for http.request from a Resolver, with no address check (unrestricted requests). */
function lookupWith(resolve: Resolver) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    resolve(hostname, (err, addresses) => {
      if (err) return callback(err, []);
      if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), []);
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** Refusal text when a restricted request names a forbidden IP literal (no lookup happens for literals). */
export function refusedLiteral(url: URL): string | null {
  const host = bareHost(url.hostname);
  return isIP(host) && isForbiddenAddress(host) ? `refused: ${host} is a private, loopback or link-local address` : null;
}

export type GetOptions = {
  /** Connect only to public addresses (live merchants). */
  restrict: boolean;
  timeoutMs: number;
  maxBytes: number;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Tests inject a resolver (used restricted or not); production uses the system one. */
  resolve?: Resolver;
};

export class OutboundError extends Error {}

/**
 * One guarded GET: no redirects followed, the body capped at `maxBytes` (a longer body is an
 * error), the whole exchange bounded by `timeoutMs` (the rejection is then a TimeoutError).
 */
export function guardedGet(raw: string, opts: GetOptions): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return reject(new OutboundError('the URL is invalid'));
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return reject(new OutboundError('the URL must be http(s)'));
    if (opts.restrict) {
      const refused = refusedLiteral(url);
      if (refused) return reject(new ForbiddenAddressError(refused));
    }
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new DOMException(`timed out after ${opts.timeoutMs} ms`, 'TimeoutError')), opts.timeoutMs);
    const onAbort = () => ac.abort(opts.signal!.reason);
    if (opts.signal?.aborted) onAbort();
    opts.signal?.addEventListener('abort', onAbort);
    const done = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    };
    const fail = (err: unknown) => {
      done();
      reject(ac.signal.aborted ? ac.signal.reason : err);
    };
    const isHttps = url.protocol === 'https:';
    // An injected resolver is used unrestricted too (a test's names for local servers).
    const lookup = opts.restrict ? guardedLookupWith(opts.resolve ?? systemResolver) : opts.resolve ? lookupWith(opts.resolve) : undefined;
    const req = (isHttps ? https : http).request(
      url,
      {
        method: 'GET',
        headers: opts.headers,
        signal: ac.signal,
        agent: false,
        ...(lookup ? { lookup: lookup as unknown as typeof import('node:dns').lookup } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let received = 0;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > opts.maxBytes) {
            res.destroy(new OutboundError(`the response is larger than ${opts.maxBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', fail);
        res.on('end', () => {
          done();
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers[k] = v;
          resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
        });
      },
    );
    req.on('error', fail);
    req.end();
  });
}
