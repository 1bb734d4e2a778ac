import { Resolver } from 'node:dns/promises';
import type { DomainVerification } from '@svc/contract';
import { guardedGet, untilBudget, type OutboundRules, type Resolver as AddressResolver } from '../../lib/ssrf.js';

/**
 * Proof that a merchant's owner controls its storefront domain (issue 24): a DNS TXT record
 * `_svc-checkout.<domain>` = `svc-verify=<token>`, or the line `svc-verify=<token>` in
 * `https://<domain>/.well-known/svc-checkout-verification.txt`. Both lookups talk to the
 * outside, so they run before (never inside) the transaction that records the result.
 */

export const TXT_LABEL = '_svc-checkout';
export const WELL_KNOWN_PATH = '/.well-known/svc-checkout-verification.txt';
/** The file is one short line (a few more allowed); anything longer is not it. */
const FILE_MAX_BYTES = 4096;

/** What the verification talks to, built once in boot.ts; tests point each at a local server. */
export type DomainProofIo = {
  /** TXT lookups: node's DNS resolver (the system's servers); a test calls `setServers` on it. */
  dns: Pick<Resolver, 'resolveTxt'>;
  /** Address lookup for the https fetch (lib/ssrf.ts checks every address it gives); the system's unless a test injects one. */
  lookup?: AddressResolver;
  /** The port the https file is fetched from: 443, a local test server's otherwise. */
  httpsPort: number;
  /** Budget of each proof lookup (the DNS query and the https fetch run side by side). */
  timeoutMs: number;
};

export function defaultDomainProofIo(): DomainProofIo {
  return { dns: new Resolver({ timeout: 2_000, tries: 2 }), httpsPort: 443, timeoutMs: 5_000 };
}

/** The instructions the merchant object carries (`domain_verification`). */
export function domainVerificationOf(domain: string, token: string, verifiedAt: Date | null): DomainVerification {
  const value = `svc-verify=${token}`;
  return {
    token,
    dns_txt: { name: `${TXT_LABEL}.${domain}`, value },
    https_file: { url: `https://${domain}${WELL_KNOWN_PATH}`, content: value },
    verified_at: verifiedAt ? verifiedAt.toISOString() : null,
  };
}

/**
 * True when either proof of `token` is published for `domain`. `rules`: the addresses the file
 * fetch may reach (lib/ssrf.ts `outboundRules` of the merchant's mode). Every failure (no
 * record, a refused address, a closed port, a timeout, another status or content) is the same
 * false, answered once the fixed budget has passed, so neither the answer nor its time can be
 * used to map a network.
 */
export async function domainProven(io: DomainProofIo, domain: string, token: string, rules: OutboundRules): Promise<boolean> {
  const startedAt = performance.now();
  const expected = `svc-verify=${token}`;
  const [txt, file] = await Promise.all([txtProven(io, domain, expected), fileProven(io, domain, expected, rules)]);
  if (txt || file) return true;
  await untilBudget(startedAt, io.timeoutMs);
  return false;
}

async function txtProven(io: DomainProofIo, domain: string, expected: string): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), io.timeoutMs);
  });
  try {
    const records = await Promise.race([io.dns.resolveTxt(`${TXT_LABEL}.${domain}`), timeout]);
    // A TXT record may arrive in several character-strings: they form one value.
    return records.some((chunks) => chunks.join('').trim() === expected);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

async function fileProven(io: DomainProofIo, domain: string, expected: string, rules: OutboundRules): Promise<boolean> {
  const origin = io.httpsPort === 443 ? `https://${domain}` : `https://${domain}:${io.httpsPort}`;
  try {
    const res = await guardedGet(`${origin}${WELL_KNOWN_PATH}`, {
      rules,
      timeoutMs: io.timeoutMs,
      maxBytes: FILE_MAX_BYTES,
      headers: { accept: 'text/plain' },
      ...(io.lookup ? { resolve: io.lookup } : {}),
    });
    if (res.status !== 200) return false;
    return res.body
      .toString('utf8')
      .split(/\r?\n/)
      .some((line) => line.trim() === expected);
  } catch {
    return false;
  }
}
