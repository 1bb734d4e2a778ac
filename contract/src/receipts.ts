import { z } from 'zod';
import { Total } from './agent.js';

export const RECEIPT_TYP = 'svc-receipt+jws';
export const RECEIPT_ISSUER = 'svc-checkout';

/**
 * The claims of the Ed25519-signed receipt (decisions.md "Receipts"): the server signs
 * exactly these, the SDK verifies them (keeping unknown extra claims for forward compatibility).
 */
export const ReceiptClaims = z.object({
  iss: z.literal(RECEIPT_ISSUER),
  sub: z.string().describe('The rcpt_ id.'),
  iat: z.number().int(),
  sessionId: z.string(),
  orderId: z.string(),
  merchantId: z.string(),
  agentId: z.string(),
  decision: z.literal('accept'),
  total: Total,
  reasonCodes: z.array(z.string()),
  mandateType: z.string(),
  mandateRef: z.string().nullable(),
  policyHash: z.string(),
  policyVersion: z.number().int(),
  rail: z.string(),
  settlementRef: z.string(),
  chain: z.string().nullable(),
  livemode: z.boolean(),
  inputFingerprint: z.string(),
});
export type ReceiptClaims = z.infer<typeof ReceiptClaims>;
