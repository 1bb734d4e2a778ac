import { createHash } from 'node:crypto';

/**
 * x402 carries no agent id. Without the X-Agent-Id header the agent is the payer: a
 * name-based UUID (RFC 9562 version 5, SHA-1) of the lower-cased payer address in this
 * fixed namespace, so one wallet keeps one reputation record, velocity count and rate-limit
 * bucket on every chain and at every merchant. Documented in docs/agent-protocol.md.
 */
export const X402_PAYER_NAMESPACE = '5b0c2f7e-3c1a-4d8e-9f60-7a2e1d4b8c93';

export function uuidV5(namespace: string, name: string): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  const b = Buffer.from(hash.subarray(0, 16));
  b[6] = (b[6]! & 0x0f) | 0x50; // version 5
  b[8] = (b[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** The agent id of a payer address (0x + 40 hex, any case). */
export const payerAgentId = (payer: string): string => uuidV5(X402_PAYER_NAMESPACE, payer.toLowerCase());
