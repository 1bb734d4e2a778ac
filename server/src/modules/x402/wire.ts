import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
} from '@x402/core/http';
import type { Network, PaymentPayload, PaymentRequired, PaymentRequirements, SettleResponse } from '@x402/core/types';
import { declarePaymentIdentifierExtension, extractAndValidatePaymentIdentifier, PAYMENT_IDENTIFIER } from '@x402/extensions/payment-identifier';
import { getAddress } from 'viem';
import { CHAINS, humanOf, X402_HEADERS, type ChainName, type ReasonCode, type SettleBody, type X402Challenge } from '@svc/contract';
import type { SettlePayment } from '../settlement/index.js';

/**
 * The x402 HTTP transport as pure functions: requirements and 402 answers out, payment
 * headers in. Encodings come from @x402/core/http (base64 JSON), shapes from
 * @x402/core/types; nothing here talks to the database or a chain.
 */

/** What one payment must be: the chain, payee and exact amount of a session or a quote. */
export type X402Due = {
  chain: ChainName;
  payTo: string;
  amountBaseUnits: string;
  /** Absolute URL of the paid resource (x402 `resource.url`). */
  resourceUrl: string;
  description: string;
};

export type X402Version = 1 | 2;

/** How long a stock client makes its authorization valid (it signs validBefore = now + this). */
export const X402_MAX_TIMEOUT_SECONDS = 300;

export const networkOf = (chain: ChainName): Network => `eip155:${CHAINS[chain].chainId}`;

/** A v2 CAIP-2 network or a v1 network name, as the chain it names (null: none we settle on). */
export function chainOfNetwork(network: string): ChainName | null {
  for (const [name, c] of Object.entries(CHAINS) as Array<[ChainName, (typeof CHAINS)[ChainName]]>) {
    if (network === name || network === `eip155:${c.chainId}`) return name;
  }
  return null;
}

export function requirementsV2(due: X402Due): PaymentRequirements {
  const c = CHAINS[due.chain];
  return {
    scheme: 'exact',
    network: networkOf(due.chain),
    amount: due.amountBaseUnits,
    asset: getAddress(c.usdc),
    payTo: getAddress(due.payTo.toLowerCase()),
    maxTimeoutSeconds: X402_MAX_TIMEOUT_SECONDS,
    extra: { name: c.domainName, version: c.domainVersion },
  };
}

export function requirementsV1(due: X402Due): X402Challenge['accepts'][number] {
  const c = CHAINS[due.chain];
  return {
    scheme: 'exact',
    network: due.chain,
    maxAmountRequired: due.amountBaseUnits,
    resource: due.resourceUrl,
    description: due.description,
    mimeType: 'application/json',
    payTo: getAddress(due.payTo.toLowerCase()),
    maxTimeoutSeconds: X402_MAX_TIMEOUT_SECONDS,
    asset: getAddress(c.usdc),
    extra: { name: c.domainName, version: c.domainVersion },
  };
}

/** Our reason code as the x402 error reason a stock client or facilitator would name it. */
const X402_ERROR: Partial<Record<ReasonCode, string>> = {
  PAYMENT_MALFORMED: 'invalid_payload',
  PAYMENT_SCHEME_UNSUPPORTED: 'unsupported_scheme',
  PAYMENT_NETWORK_MISMATCH: 'invalid_network',
  SIGNER_MISMATCH: 'invalid_exact_evm_payload_signature',
  PAYMENT_RECIPIENT_MISMATCH: 'invalid_exact_evm_payload_recipient_mismatch',
  PAYMENT_AMOUNT_MISMATCH: 'invalid_exact_evm_payload_authorization_value',
  PAYMENT_NOT_YET_VALID: 'invalid_exact_evm_payload_authorization_valid_after',
  PAYMENT_EXPIRED: 'invalid_exact_evm_payload_authorization_valid_before',
  NONCE_ALREADY_USED: 'invalid_exact_evm_nonce_already_used',
  INSUFFICIENT_FUNDS: 'insufficient_funds',
  CAPTURE_FAILED: 'unexpected_settle_error',
};
export const x402ErrorOf = (code: string): string => X402_ERROR[code as ReasonCode] ?? code.toLowerCase();

export type X402Answer402 = {
  headers: Record<string, string>;
  body: X402Challenge;
  /** The v2 PaymentRequired the PAYMENT-REQUIRED header encodes (the MCP transport sends it as is). */
  required: PaymentRequired;
};

/** The payment-identifier extension as @x402/extensions declares it (`{info, schema}`), optional. */
const PAYMENT_IDENTIFIER_DECLARATION = declarePaymentIdentifierExtension(false);

/**
 * A 402 in both versions at once: PAYMENT-REQUIRED (v2, with the payment-identifier
 * extension declared, optional) and the v1 PaymentRequired as the body, plus our codes.
 */
export function challenge(
  due: X402Due,
  refusal: { status: X402Challenge['status']; reason_codes: string[]; error_human: string } | null,
  sessionId?: string,
): X402Answer402 {
  const error = refusal ? x402ErrorOf(refusal.reason_codes[0] ?? 'PAYMENT_MALFORMED') : 'payment_required';
  const v2: PaymentRequired = {
    x402Version: 2,
    error,
    resource: { url: due.resourceUrl, description: due.description, mimeType: 'application/json' },
    accepts: [requirementsV2(due)],
    extensions: { [PAYMENT_IDENTIFIER]: PAYMENT_IDENTIFIER_DECLARATION },
  };
  const body: X402Challenge = {
    x402Version: 1,
    error,
    accepts: [requirementsV1(due)],
    status: refusal?.status ?? 'payment_required',
    reason_codes: refusal?.reason_codes ?? ['PAYMENT_REQUIRED'],
    error_human: refusal?.error_human ?? 'Payment required: pay with an x402 client (PAYMENT-SIGNATURE, or X-PAYMENT for x402 v1).',
    ...(sessionId ? { session_id: sessionId } : {}),
  };
  return { headers: { [X402_HEADERS.paymentRequired]: encodePaymentRequiredHeader(v2) }, body, required: v2 };
}

/** The SettleResponse of a settled payment (v1 names the network, v2 gives its CAIP-2 id). */
export function settleResponseOf(version: X402Version, chain: ChainName, transaction: string, payer: string): SettleResponse {
  return {
    success: true,
    transaction,
    network: version === 2 ? networkOf(chain) : (chain as Network),
    payer: getAddress(payer.toLowerCase()),
  };
}

/** The settlement result header: PAYMENT-RESPONSE for v2, X-PAYMENT-RESPONSE for v1. */
export function paymentResponseHeader(version: X402Version, chain: ChainName, transaction: string, payer: string): Record<string, string> {
  const res = settleResponseOf(version, chain, transaction, payer);
  return { [version === 2 ? X402_HEADERS.paymentResponse : X402_HEADERS.xPaymentResponse]: encodePaymentResponseHeader(res) };
}

type WirePayment = NonNullable<SettleBody['payment']>;

/** A payment read off the wire: the canonical settle payment and what the x402 envelope said. */
export type ReadPayment = {
  payment: SettlePayment;
  /** Set when the payment came as an x402 PaymentPayload (header or JSON). */
  x402Version: X402Version | null;
  /** The network the payer says it signed for (x402 payloads only). */
  network: string | null;
  /** x402 `payment-identifier` extension id, when the client sent one. */
  paymentId: string | null;
};

export type Refused = { refused: ReasonCode; human: string };

const refuse = (code: ReasonCode, human?: string): Refused => ({ refused: code, human: human ?? humanOf(code) });

/** Integer unix seconds from a JSON number or the decimal string @x402/evm sends. */
function seconds(v: number | string): number | null {
  const n = typeof v === 'number' ? v : Number(v);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/**
 * Any accepted payment shape (today's JSON, the x402 v2 or v1 PaymentPayload) as the one
 * canonical settle payment: scheme `x402-exact`, validAfter/validBefore as integers. The
 * same authorization hashes the same whichever way it came, so replays stay replays.
 */
export function canonicalPayment(p: WirePayment): ReadPayment | Refused {
  if ('mock' in p) return { payment: { mock: true }, x402Version: null, network: null, paymentId: null };
  let scheme: string;
  let exact: { authorization: Extract<WirePayment, { authorization: unknown }>['authorization']; signature: string };
  let x402Version: X402Version | null = null;
  let network: string | null = null;
  let paymentId: string | null = null;
  if ('x402Version' in p) {
    x402Version = p.x402Version;
    scheme = p.x402Version === 2 ? p.accepted.scheme : p.scheme;
    network = p.x402Version === 2 ? p.accepted.network : p.network;
    exact = p.payload;
    if (p.x402Version === 2 && p.extensions?.[PAYMENT_IDENTIFIER] !== undefined) {
      // Clients echo the declaration, schema included. The library compiles a schema it is given
      // with Ajv on every call (about 16 ms of CPU, and a schema the client chose): the info is
      // judged by the declared rules alone, which the library checks without one.
      const sent: unknown = p.extensions[PAYMENT_IDENTIFIER];
      const judged = typeof sent === 'object' && sent !== null ? { info: (sent as { info?: unknown }).info } : sent;
      // The library's PaymentPayload is its own v2 type; `p` is the contract's parse of the same wire object.
      const pid = extractAndValidatePaymentIdentifier({ ...p, extensions: { [PAYMENT_IDENTIFIER]: judged } } as unknown as PaymentPayload);
      if (!pid.validation.valid) return refuse('PAYMENT_MALFORMED', `extensions.payment-identifier: ${(pid.validation.errors ?? []).join('; ')}`);
      paymentId = pid.id;
    }
  } else {
    scheme = p.scheme;
    exact = p;
  }
  const a = exact.authorization;
  const validAfter = seconds(a.validAfter);
  const validBefore = seconds(a.validBefore);
  if (validAfter === null || validBefore === null) {
    return refuse('PAYMENT_MALFORMED', 'authorization.validAfter and validBefore must be integer unix seconds.');
  }
  return {
    payment: {
      scheme: scheme === 'exact' ? 'x402-exact' : scheme,
      authorization: { from: a.from, to: a.to, value: a.value, validAfter, validBefore, nonce: a.nonce },
      signature: exact.signature,
    },
    x402Version,
    network,
    paymentId,
  };
}

/** The x402 request header, if any: PAYMENT-SIGNATURE (v2) wins over X-PAYMENT (v1). */
export function paymentHeaderOf(get: (name: string) => string | undefined): { version: X402Version; value: string } | null {
  const v2 = get(X402_HEADERS.paymentSignature);
  if (v2) return { version: 2, value: v2 };
  const v1 = get(X402_HEADERS.xPayment);
  if (v1) return { version: 1, value: v1 };
  return null;
}

/** Decodes a payment header into the JSON payment shape the contract validates (null: not base64 JSON). */
export function decodePaymentHeader(value: string): unknown {
  try {
    return decodePaymentSignatureHeader(value.trim());
  } catch {
    return null;
  }
}

/** The payer the payload claims (before verification: only for the PAYMENT-RESPONSE of a verified payment). */
export const payerOf = (p: SettlePayment): string | null => ('authorization' in p ? p.authorization.from : null);
