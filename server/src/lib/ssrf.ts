import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type Socket } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Config } from '../config.js';

/**
 * The one outbound-URL guard: every URL a user can point the server at (webhook endpoints,
 * trusted issuer JWKS, a merchant domain's verification fetch) is checked here when written
 * (`checkOutboundUrl`) and again at connect time on every address the socket may reach
 * (`guardedLookupWith`, `resolveTarget`, `guardedGet`). Which rules apply is `outboundRules`.
 * docs/decisions.md "Outbound URLs and port state".
 */

/**
 * Which addresses a request may reach:
 * - `public`: public unicast addresses only, `https` only (live merchants everywhere; every
 *   mode when NODE_ENV=production);
 * - `loopback`: public addresses, plus loopback (127.0.0.0/8, ::1, `localhost`), where `http`
 *   is allowed too (test mode outside production, the default, for the README's local receivers);
 * - `any`: anything, `http` or `https` (test mode outside production with SVC_ALLOW_PRIVATE_URLS=true).
 */
export type OutboundRules = { reach: 'public' | 'loopback' | 'any' };

const PUBLIC_RULES: OutboundRules = Object.freeze({ reach: 'public' });
const LOOPBACK_RULES: OutboundRules = Object.freeze({ reach: 'loopback' });
const ANY_RULES: OutboundRules = Object.freeze({ reach: 'any' });

/**
 * The rules for a request made for a merchant (or project) in `livemode`. In production both
 * modes get the live rules and no setting loosens them (the configuration also refuses
 * SVC_ALLOW_PRIVATE_URLS=true there); outside production a test-mode request may reach
 * loopback, or anything when SVC_ALLOW_PRIVATE_URLS=true.
 */
export function outboundRules(config: Pick<Config, 'NODE_ENV' | 'SVC_ALLOW_PRIVATE_URLS'>, livemode: boolean): OutboundRules {
  if (livemode || config.NODE_ENV === 'production') return PUBLIC_RULES;
  return config.SVC_ALLOW_PRIVATE_URLS ? ANY_RULES : LOOPBACK_RULES;
}

export type AddressClass = 'public' | 'loopback' | 'forbidden';

/** IANA's global unicast block: no other IPv6 address is publicly routable. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

function classifyV4(a: ipaddr.IPv4): AddressClass {
  const range = a.range();
  if (range === 'unicast') return 'public';
  return range === 'loopback' ? 'loopback' : 'forbidden';
}

const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);

/**
 * The class of one IP address (as DNS returns it or as the WHATWG URL parser normalized it;
 * a zone id is allowed, anything unparsable is forbidden). Ranges come from ipaddr.js
 * (`range()`): only `unicast` is public, only `loopback` (127.0.0.0/8, ::1) is loopback; an
 * IPv6 address must also be global unicast (2000::/3, which leaves out the IPv4-compatible
 * ::/96 and NAT64 64:ff9b::/96). IPv6 that reaches an IPv4 address is judged by it and is at
 * most public: IPv4-mapped (::ffff:a.b.c.d), 6to4 (2002::/16) and Teredo (2001::/32, server
 * and obfuscated client), so `::ffff:127.0.0.1` is forbidden, never loopback.
 */
export function classifyAddress(address: string): AddressClass {
  if (isIP(address) === 0) return 'forbidden';
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.parse(address);
  } catch {
    return 'forbidden';
  }
  if (parsed.kind() === 'ipv4') return classifyV4(parsed as ipaddr.IPv4);
  const a = parsed as ipaddr.IPv6;
  const range = a.range();
  if (range === 'loopback') return 'loopback';
  const p = a.parts;
  let carried: ipaddr.IPv4[] | null = null;
  if (range === 'ipv4Mapped') carried = [a.toIPv4Address()];
  else if (range === '6to4') carried = [v4(p[1]!, p[2]!)];
  else if (range === 'teredo') carried = [v4(p[2]!, p[3]!), v4(~p[6]! & 0xffff, ~p[7]! & 0xffff)];
  if (carried) return carried.every((c) => classifyV4(c) === 'public') ? 'public' : 'forbidden';
  return range === 'unicast' && a.match(GLOBAL_UNICAST_V6) ? 'public' : 'forbidden';
}

/** True for an address a live (public-rules) request must not reach. */
export function isForbiddenAddress(address: string): boolean {
  return classifyAddress(address) !== 'public';
}

/** Whether the rules let a request connect to this address. */
export function addressAllowed(address: string, rules: OutboundRules): boolean {
  if (rules.reach === 'any') return true;
  const c = classifyAddress(address);
  return c === 'public' || (c === 'loopback' && rules.reach === 'loopback');
}

/** URL.hostname keeps IPv6 literals in brackets, and a fully qualified name may end in a dot. */
export function bareHost(hostname: string): string {
  if (hostname.startsWith('[') && hostname.endsWith(']')) return hostname.slice(1, -1);
  return hostname.replace(/\.+$/, '').toLowerCase();
}

/**
 * A URL host (bare) as the write-time rules see it: an IP literal by its class; `localhost`
 * and `*.localhost` are loopback; `.local`, `.internal` and single-label names are forbidden
 * (they never name a public host); any other name counts as public until it is resolved at
 * connect time.
 */
function classifyHost(host: string): AddressClass {
  if (isIP(host)) return classifyAddress(host);
  if (host === 'localhost' || host.endsWith('.localhost')) return 'loopback';
  if (host.endsWith('.local') || host.endsWith('.internal') || !host.includes('.')) return 'forbidden';
  return 'public';
}

export type OutboundUrlCheck = { ok: true; href: string } | { ok: false; why: string };

const PRIVATE_WHY =
  'must not target a private, link-local, metadata, unspecified, multicast or reserved address or a local name';

/**
 * Write-time rules for a URL the service will call (the WHATWG URL parser has already turned
 * every numeric, octal, hex, short and IPv4-mapped form into its canonical host):
 * - always: http(s), no credentials, no fragment;
 * - `public`: https, and the host is a public address or a public-looking name;
 * - `loopback`: https to such a host, or http(s) to a loopback host;
 * - `any`: any host.
 * Names are checked again on their resolved addresses at connect time. Returns the
 * normalized URL or why it is refused.
 */
export function checkOutboundUrl(raw: string, rules: OutboundRules): OutboundUrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, why: 'must be an absolute URL such as https://example.com/path' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { ok: false, why: 'must use https' };
  if (url.username || url.password) return { ok: false, why: 'must not contain credentials' };
  if (url.hash) return { ok: false, why: 'must not contain a fragment' };
  if (rules.reach === 'any') return { ok: true, href: url.href };
  const host = classifyHost(bareHost(url.hostname));
  if (rules.reach === 'public') {
    if (url.protocol !== 'https:') return { ok: false, why: 'must use https (live rules)' };
    if (host !== 'public') return { ok: false, why: `${PRIVATE_WHY}, loopback included (live rules)` };
    return { ok: true, href: url.href };
  }
  if (host === 'forbidden') {
    return { ok: false, why: `${PRIVATE_WHY} (outside production test mode also allows loopback: 127.0.0.0/8, [::1], localhost)` };
  }
  if (url.protocol === 'http:' && host !== 'loopback') {
    return { ok: false, why: 'http is only allowed to a loopback address (localhost, 127.0.0.1, [::1]) in test mode; use https' };
  }
  return { ok: true, href: url.href };
}

/**
 * Why a connection was refused, with no address or DNS detail (it could map an internal
 * network): a name that does not resolve gets the same text as one that resolves to a
 * disallowed address, so the answer does not tell which internal names exist.
 */
export function refusalText(rules: OutboundRules): string {
  if (rules.reach === 'any') return 'refused: the host name does not resolve';
  return rules.reach === 'loopback' ? 'refused: the host is not a public or loopback address' : 'refused: the host is not a public address';
}

export class ForbiddenAddressError extends Error {
  readonly code = 'WEBHOOK_ADDRESS_FORBIDDEN';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
export type Resolver = (hostname: string, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

export const systemResolver: Resolver = (hostname, callback) => dnsLookup(hostname, { all: true, verbatim: true }, callback);

/**
 * A `lookup` for http.request: resolves every address, refuses the connection if any is not
 * allowed by the rules (DNS failures are refusals too, with the same text), and hands the
 * checked addresses to the socket so a second resolution cannot swap them (DNS rebinding).
 */
export function guardedLookupWith(resolve: Resolver, rules: OutboundRules = PUBLIC_RULES) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    resolve(hostname, (err, addresses) => {
      if (err || addresses.length === 0 || addresses.some((a) => !addressAllowed(a.address, rules))) {
        return callback(new ForbiddenAddressError(refusalText(rules)), []);
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

/** The public-rules lookup on the system resolver. */
export const guardedLookup = guardedLookupWith(systemResolver);

export type Target =
  | { ok: true; host: string; addresses: LookupAddress[] | null; nonPublic: boolean }
  | { ok: false; why: string };

/**
 * Where a request to `url` would connect, checked before anything connects: an IP literal as
 * is, a name through the resolver (every address must be allowed). `addresses` (null for a
 * literal) is what the socket's lookup must hand out (`pinnedLookup`); `nonPublic` says
 * whether any of them is a loopback or private address (its failures must not tell port state).
 */
export async function resolveTarget(url: URL, rules: OutboundRules, resolve: Resolver = systemResolver): Promise<Target> {
  const host = bareHost(url.hostname);
  if (isIP(host)) {
    if (!addressAllowed(host, rules)) return { ok: false, why: refusalText(rules) };
    return { ok: true, host, addresses: null, nonPublic: classifyAddress(host) !== 'public' };
  }
  const addresses = await new Promise<LookupAddress[] | null>((done) => resolve(host, (err, list) => done(err ? null : list)));
  if (!addresses || addresses.length === 0 || addresses.some((a) => !addressAllowed(a.address, rules))) {
    return { ok: false, why: refusalText(rules) };
  }
  return { ok: true, host, addresses, nonPublic: addresses.some((a) => classifyAddress(a.address) !== 'public') };
}

/** A socket lookup that hands out exactly the addresses `resolveTarget` checked. */
export function pinnedLookup(addresses: LookupAddress[]): typeof import('node:dns').lookup {
  const lookup = (_hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  };
  // http.request's `lookup` option is typed as dns.lookup (overloads and __promisify__); net only calls the (host, options, callback) form.
  return lookup as unknown as typeof import('node:dns').lookup;
}

/**
 * Checks the peer of a (possibly reused keep-alive) socket against the rules: a pooled socket
 * opened under other rules or an earlier DNS answer must not carry this request.
 * Returns whether the peer is non-public, or null when it may not be used.
 */
export function checkPeer(socket: Socket, rules: OutboundRules): boolean | null {
  const peer = socket.remoteAddress;
  if (!peer) return false;
  if (!addressAllowed(peer, rules)) return null;
  return classifyAddress(peer) !== 'public';
}

/**
 * Resolves once `budgetMs` has passed since `startedAt` (a `performance.now()` reading), or at
 * once when `signal` aborts. Failed outbound requests answer through this, so a closed port,
 * an open port that hangs up, one that answers an error and one that stays silent all answer
 * at the same moment (the budget, which is also the request's timeout).
 */
export function untilBudget(startedAt: number, budgetMs: number, signal?: AbortSignal): Promise<void> {
  const wait = startedAt + budgetMs - performance.now();
  if (wait <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.ceil(wait));
    signal?.addEventListener('abort', done);
  });
}

export type GetOptions = {
  rules: OutboundRules;
  /** The request's timeout and its fixed budget: a failure is handed back only once it has passed. */
  timeoutMs: number;
  maxBytes: number;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Tests inject a resolver; production uses the system one. */
  resolve?: Resolver;
};

export class OutboundError extends Error {}

export type GetResult = { status: number; headers: Record<string, string>; body: Buffer };

/**
 * One guarded GET: address rules before and at connect time, no redirects followed, the body
 * capped at `maxBytes` (a longer body is an error), the whole exchange bounded by `timeoutMs`
 * (the rejection is then a TimeoutError). A failure (a rejection or a non-2xx status) is
 * handed back only when `timeoutMs` has passed since the call (the caller's own abort excepted),
 * so callers cannot tell a closed port from a silent one by the time of the answer; a caller
 * that also judges a 2xx body (a JWKS, a verification file) pads its own failures with
 * `untilBudget`.
 */
export async function guardedGet(raw: string, opts: GetOptions): Promise<GetResult> {
  const startedAt = performance.now();
  let outcome: { ok: true; value: GetResult } | { ok: false; err: unknown };
  try {
    const value = await getOnce(raw, opts);
    outcome = { ok: true, value };
  } catch (err) {
    outcome = { ok: false, err };
  }
  if (outcome.ok && outcome.value.status >= 200 && outcome.value.status < 300) return outcome.value;
  await untilBudget(startedAt, opts.timeoutMs, opts.signal);
  if (!outcome.ok) throw opts.signal?.aborted ? opts.signal.reason : outcome.err;
  return outcome.value;
}

async function getOnce(raw: string, opts: GetOptions): Promise<GetResult> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OutboundError('the URL is invalid');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new OutboundError('the URL must be http(s)');
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new DOMException(`timed out after ${opts.timeoutMs} ms`, 'TimeoutError')), opts.timeoutMs);
  const onAbort = () => ac.abort(opts.signal!.reason);
  if (opts.signal?.aborted) onAbort();
  opts.signal?.addEventListener('abort', onAbort);
  try {
    const target = await resolveTarget(url, opts.rules, opts.resolve);
    if (!target.ok) throw new ForbiddenAddressError(target.why);
    if (ac.signal.aborted) throw ac.signal.reason;
    return await new Promise<GetResult>((resolve, reject) => {
      const fail = (err: unknown) => reject(ac.signal.aborted ? ac.signal.reason : err);
      const req = (url.protocol === 'https:' ? https : http).request(
        url,
        {
          method: 'GET',
          headers: opts.headers,
          signal: ac.signal,
          agent: false,
          ...(target.addresses ? { lookup: pinnedLookup(target.addresses) } : {}),
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
            const headers: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers[k] = v;
            resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
          });
        },
      );
      req.on('socket', (socket) => {
        const check = () => {
          if (checkPeer(socket, opts.rules) === null) req.destroy(new ForbiddenAddressError(refusalText(opts.rules)));
        };
        if (socket.remoteAddress) check();
        else socket.once('connect', check);
      });
      req.on('error', fail);
      req.end();
    });
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}
