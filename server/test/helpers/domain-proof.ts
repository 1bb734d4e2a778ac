import { execFileSync } from 'node:child_process';
import dgram from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import dnsPacket from 'dns-packet';
import { ulid } from 'ulid';
import type { TestApp, TestKey } from './harness.js';

/** Merchant domains the fixture can serve over https: one label under this (its certificate is `*.proof.example`). */
export const PROOF_ZONE = 'proof.example';

export const proofDomain = () => `d-${ulid().toLowerCase().slice(-12)}.${PROOF_ZONE}`;

/**
 * The outside world of a domain verification, on this machine: a DNS server on 127.0.0.1
 * (UDP, answers the TXT and A records a test publishes, NXDOMAIN otherwise; packets with
 * dns-packet) and an https server with a certificate for `*.proof.example` that this test
 * process trusts, serving `/.well-known/svc-checkout-verification.txt` per Host. `install`
 * points an app's services.domainProof at both (node's DNS resolver with setServers, the
 * address lookup of the SSRF guard through the same DNS server, the https port).
 */
export class DomainProofWorld {
  readonly txt = new Map<string, string[]>();
  readonly addresses = new Map<string, string>();
  readonly files = new Map<string, string>();
  /** Hosts whose well-known file was requested, in order. */
  readonly fileRequests: string[] = [];
  readonly resolver = new Resolver({ timeout: 1_000, tries: 1 });

  private constructor(
    private readonly dns: dgram.Socket,
    private readonly web: https.Server,
  ) {}

  static async start(): Promise<DomainProofWorld> {
    const { key, cert } = selfSignedCertificate();
    // The test process trusts the certificate the way a real site's chain is trusted: in the default CA list.
    tls.setDefaultCACertificates([...tls.getCACertificates('default'), cert]);
    const dns = dgram.createSocket('udp4');
    const web = https.createServer({ key, cert });
    const world = new DomainProofWorld(dns, web);
    dns.on('message', (msg, rinfo) => world.answer(msg, rinfo));
    web.on('request', (req, res) => {
      const host = (req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
      world.fileRequests.push(host);
      const body = world.files.get(host);
      if (req.url !== '/.well-known/svc-checkout-verification.txt' || body === undefined) {
        res.writeHead(404).end('not found');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end(body);
    });
    await new Promise<void>((resolve) => dns.bind(0, '127.0.0.1', () => resolve()));
    await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', () => resolve()));
    world.resolver.setServers([`127.0.0.1:${(dns.address() as AddressInfo).port}`]);
    return world;
  }

  get httpsPort(): number {
    return (this.web.address() as AddressInfo).port;
  }

  /** Points the app's domain verification at this world. */
  install(app: TestApp): void {
    app.services.domainProof = {
      dns: this.resolver,
      lookup: (hostname, callback) => {
        this.resolver.resolve4(hostname).then(
          (list) => callback(null, list.map((address) => ({ address, family: 4 }))),
          (err: NodeJS.ErrnoException) => callback(err, []),
        );
      },
      httpsPort: this.httpsPort,
      timeoutMs: 3_000,
    };
  }

  /** Publishes `_svc-checkout.<domain>` TXT `value` (added to any already there). */
  publishTxt(domain: string, value: string): void {
    const name = `_svc-checkout.${domain}`;
    this.txt.set(name, [...(this.txt.get(name) ?? []), value]);
  }

  /** Serves the well-known file of `domain` with `content`, the domain resolving to `address` (this machine's https server by default). */
  serveFile(domain: string, content: string, address = '127.0.0.1'): void {
    this.files.set(domain, content);
    this.addresses.set(domain, address);
  }

  private answer(msg: Buffer, rinfo: dgram.RemoteInfo): void {
    let query: dnsPacket.Packet;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return;
    }
    const answers: dnsPacket.Answer[] = [];
    for (const q of query.questions ?? []) {
      const name = q.name.toLowerCase();
      if (q.type === 'TXT') for (const value of this.txt.get(name) ?? []) answers.push({ type: 'TXT', name: q.name, ttl: 1, class: 'IN', data: value });
      const address = this.addresses.get(name);
      if (q.type === 'A' && address) answers.push({ type: 'A', name: q.name, ttl: 1, class: 'IN', data: address });
    }
    const known = (query.questions ?? []).some((q) => this.txt.has(q.name.toLowerCase()) || this.addresses.has(q.name.toLowerCase()));
    const NXDOMAIN = 3;
    const reply = dnsPacket.encode({
      type: 'response',
      id: query.id,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | (known ? 0 : NXDOMAIN),
      questions: query.questions,
      answers,
    });
    this.dns.send(reply, rinfo.port, rinfo.address);
  }

  async close(): Promise<void> {
    this.web.closeAllConnections();
    await new Promise<void>((resolve) => this.web.close(() => resolve()));
    await new Promise<void>((resolve) => this.dns.close(() => resolve()));
  }
}

/** A throwaway certificate for `*.proof.example` (Debian's openssl, like the browser tests' chromium). */
function selfSignedCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'svc-proof-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
      '-subj', `/CN=${PROOF_ZONE}`, '-addext', `subjectAltName=DNS:*.${PROOF_ZONE},DNS:${PROOF_ZONE}`,
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'pipe' });
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The merchant's proof, as its owner reads it from the API. */
export type ProofInstructions = { token: string; dns_txt: { name: string; value: string }; https_file: { url: string; content: string } };

/** GIVEN-helper: publishes the merchant's TXT proof and verifies through the API; returns the verified merchant. */
export async function verifyDomainByTxt(app: TestApp, world: DomainProofWorld, key: TestKey, merchantId: string) {
  const m = await app.request('GET', `/v1/merchants/${merchantId}`, { key });
  if (m.status !== 200) throw new Error(`merchant: ${m.status} ${m.text}`);
  world.publishTxt(m.body.domain, (m.body.domain_verification as ProofInstructions).dns_txt.value);
  const verified = await app.request('POST', `/v1/merchants/${merchantId}/domain/verify`, { key });
  if (verified.status !== 200) throw new Error(`verify: ${verified.status} ${verified.text}`);
  return verified.body;
}
