import { z } from 'zod';

/**
 * The reason-code registry: the only source of error codes, their HTTP status and a
 * one-line human text. The server throws `ApiError(code)` and never invents a status.
 * `status` is the HTTP status when the code is the primary code of an error response;
 * policy and payment codes also appear inside 402/403/202 settle bodies and verdicts.
 */
export const REASON_CODES = {
  // 7.2 API plane
  UNAUTHENTICATED: { status: 401, human: 'No API key was presented; send Authorization: Bearer <API_KEY>.' },
  INVALID_API_KEY: { status: 401, human: 'The API key is unknown or has been revoked.' },
  INVALID_SESSION: { status: 401, human: 'The management session is invalid or has expired.' },
  INSUFFICIENT_SCOPE: { status: 403, human: 'The API key lacks the scope this route needs.' },
  KEY_MODE_FORBIDDEN: { status: 403, human: 'A key mints and manages keys of its own mode only; sign in to the dashboard for the other mode.' },
  CSRF_REJECTED: { status: 403, human: 'A cookie-authenticated write must come from this service\'s own origin (Origin header); API keys are not affected.' },
  SIGN_IN_LINK_EXPIRED: { status: 410, human: 'The sign-in link was already used or has expired; request a new one.' },
  DEVICE_CODE_EXPIRED: { status: 410, human: 'The device code is unknown, expired or already used; run the login again.' },
  SLOW_DOWN: { status: 429, human: 'Polled faster than the interval; wait the interval (now 5 s longer) between polls.' },
  KEY_NOT_ACTIVE: { status: 409, human: 'The key is revoked, expired or already rolled; roll the key that replaced it.' },
  LIVE_KEY_REQUIRED: { status: 403, human: 'This route needs a live key (svc_live_).' },
  TEST_MODE_RAIL_FORBIDDEN: { status: 403, human: 'This route or rail is for test mode only and was called with a live key.' },
  VALIDATION_FAILED: { status: 400, human: 'The request failed validation.' },
  BAD_REQUEST: { status: 400, human: 'The request body is not valid JSON.' },
  PAYLOAD_TOO_LARGE: { status: 413, human: 'The request body is larger than 256 KB.' },
  RATE_LIMITED: { status: 429, human: 'Too many requests; retry after the time given in Retry-After.' },
  NOT_FOUND: { status: 404, human: 'No such resource or route.' },
  DATABASE_UNAVAILABLE: { status: 503, human: 'The database is unavailable.' },
  INTERNAL_ERROR: { status: 500, human: 'An unexpected error occurred; it has been logged.' },
  IDEMPOTENCY_KEY_REUSED: { status: 409, human: 'This Idempotency-Key was already used with a different request.' },
  IDEMPOTENCY_KEY_IN_PROGRESS: { status: 409, human: 'A request with this Idempotency-Key is still being processed; retry shortly.' },
  REQUEST_HEADERS_TOO_LARGE: { status: 431, human: 'The request headers are larger than the server accepts (16 KB).' },
  EXPECTATION_FAILED: { status: 417, human: 'The Expect header asks for something this server does not support (only 100-continue).' },
  REQUEST_TIMEOUT: { status: 408, human: 'The request was not received in time.' },
  METHOD_NOT_ALLOWED: { status: 405, human: 'This server is not a proxy: CONNECT is not supported.' },

  // 7.3 domain: configuration
  MERCHANT_SLUG_TAKEN: { status: 409, human: 'That slug is already used by another merchant in this mode, or belongs to another project.' },
  MERCHANT_DOMAIN_TAKEN: { status: 409, human: 'Another project has already verified this domain.' },
  DOMAIN_VERIFICATION_FAILED: { status: 422, human: 'Neither the DNS TXT record nor the https file proving control of the domain was found.' },
  PRODUCT_SKU_TAKEN: { status: 409, human: 'That SKU already exists for this merchant.' },
  PRICE_AMOUNT_INVALID: { status: 400, human: 'price.amount must be a decimal string with at most 12 integer digits and 8 decimal places.' },
  CONFIG_INVALID: { status: 422, human: 'The configuration cannot be published; see findings.' },
  RECEIVING_RAIL_UNKNOWN: { status: 400, human: 'Receiving has a rail other than x402, card or mock.' },
  RECEIVING_ADDRESS_INVALID: { status: 400, human: 'A receiving field is missing, or the x402 address is not a 20-byte 0x hex address.' },
  RECEIVING_CHAIN_UNSUPPORTED: { status: 400, human: 'The x402 chain must be base or base-sepolia.' },
  RECEIVING_ASSET_UNKNOWN: { status: 400, human: 'The (chain, asset) pair is not in the token registry; only USDC is supported.' },
  RECEIVING_NO_RAIL_ENABLED: { status: 400, human: 'At least one receiving rail must be configured.' },
  RECEIVING_MOCK_IN_LIVE: { status: 400, human: 'The mock rail cannot be used on a live merchant.' },
  RECEIVING_BALANCE_UNAVAILABLE: { status: 409, human: 'The receiving balance is read on chain in live mode only, for a merchant that receives USDC over x402.' },
  POLICY_FIELD_UNKNOWN: { status: 400, human: 'The policy has a field that is not a known MerchantPolicy field.' },
  POLICY_FIELD_INVALID: { status: 400, human: 'A policy field has the wrong type or an invalid value.' },
  CATALOG_CURRENCY_UNSETTLEABLE: { status: 400, human: 'A catalog item is priced in a currency no configured rail can settle.' },
  POLICY_RAILS_UNSATISFIABLE: { status: 400, human: 'The policy allows none of the merchant\'s configured rails.' },
  POLICY_REJECTS_NEW_AGENTS: { status: 400, human: 'Warning (publishable): the policy rejects every agent without a mandate or history.' },
  POLICY_HOLDS_NEW_AGENTS: { status: 400, human: 'Warning (publishable): the policy holds every purchase of an agent without a mandate or history for review.' },

  // checkout
  SKU_UNKNOWN: { status: 404, human: 'A SKU in the cart does not exist at this merchant.' },
  SKU_UNAVAILABLE: { status: 422, human: 'A SKU in the cart is not available.' },
  RAIL_NOT_ALLOWED: { status: 422, human: 'The rail is not allowed by the merchant policy or not valid in this mode.' },
  CURRENCY_UNSUPPORTED: { status: 422, human: 'The cart currency cannot be paid over the chosen rail.' },
  SESSION_NOT_FOUND: { status: 404, human: 'No such checkout session at this merchant.' },
  SESSION_ALREADY_SETTLED: { status: 409, human: 'The session already reached a terminal state with a different payment.' },
  SESSION_EXPIRED: { status: 410, human: 'The checkout session has expired; open a new one.' },
  SESSION_NOT_HELD: { status: 409, human: 'The session is not awaiting review.' },
  FACILITATOR_UNAVAILABLE: { status: 503, human: 'No facilitator is configured for live settlement, or it cannot be reached.' },
  SETTLEMENT_PENDING: { status: 202, human: 'The transfer was sent and is not confirmed yet; poll the session for the outcome.' },
  SETTLEMENT_IN_PROGRESS: { status: 409, human: 'Another payment for this session is being settled; poll the session.' },
  REAUTHORIZATION_REQUIRED: { status: 202, human: 'The merchant approved the order, but the held authorization has expired: the agent must sign a fresh one and settle.' },
  RAIL_NOT_IMPLEMENTED: { status: 402, human: 'This rail is a typed stub and cannot settle.' },

  // payment proof (402)
  PAYMENT_MALFORMED: { status: 402, human: 'The payment payload is malformed.' },
  PAYMENT_SCHEME_UNSUPPORTED: { status: 402, human: 'The payment scheme is not supported for this rail.' },
  PAYMENT_NETWORK_MISMATCH: { status: 402, human: 'The payment is for another network than the one this merchant settles on.' },
  SIGNER_MISMATCH: { status: 402, human: 'The payment signature does not recover to authorization.from (check the EIP-712 domain name).' },
  CONTRACT_SIGNATURE_UNVERIFIABLE: {
    status: 402,
    human: "authorization.from is a smart-contract wallet's signature (EIP-1271 / ERC-6492) that this test-mode server cannot check: it has no test chain (SVC_RPC_URL_BASE_SEPOLIA); pay from an EOA or use a server with a test chain.",
  },
  ERC6492_FACTORY_NOT_ALLOWED: { status: 402, human: "The ERC-6492 signature deploys the wallet through a factory this service does not allow (SVC_ERC6492_FACTORIES)." },
  PAYMENT_RECIPIENT_MISMATCH: { status: 402, human: 'authorization.to is not the merchant\'s payTo address.' },
  PAYMENT_AMOUNT_MISMATCH: { status: 402, human: 'authorization.value is not exactly amountBaseUnits.' },
  PAYMENT_NOT_YET_VALID: { status: 402, human: 'The authorization is not valid yet (validAfter is in the future).' },
  PAYMENT_EXPIRED: { status: 402, human: 'The authorization expires too soon or has expired (validBefore).' },
  NONCE_ALREADY_USED: { status: 402, human: 'The authorization nonce was already used by this payer.' },
  INSUFFICIENT_FUNDS: { status: 402, human: 'The payer has insufficient funds.' },
  CAPTURE_FAILED: { status: 402, human: 'The facilitator could not capture the payment; retry with a new authorization.' },

  // mandates
  MANDATE_MALFORMED: { status: 403, human: 'The mandate is malformed.' },
  MANDATE_INVALID_SIGNATURE: { status: 403, human: 'The mandate signature does not verify against the trusted issuer keys.' },
  MANDATE_EXPIRED: { status: 403, human: 'The mandate has expired.' },
  MANDATE_NOT_APPROVED: { status: 403, human: 'The mandate decision is not approve.' },
  MANDATE_AMOUNT_INSUFFICIENT: { status: 403, human: 'The mandate max_amount is below the cart total.' },
  MANDATE_MERCHANT_MISMATCH: { status: 403, human: 'The mandate was issued for another merchant.' },
  MANDATE_AGENT_MISMATCH: { status: 403, human: 'The mandate was issued for another agent (agent_id differs from the session).' },
  MANDATE_REPLAY: { status: 403, human: 'The mandate subject was already used.' },
  MANDATE_TYPE_UNSUPPORTED: { status: 403, human: 'This mandate type cannot be verified here (acp: ACP has no crypto payment handler yet); send svc, ap2 or none.' },
  MANDATE_ISSUER_UNAVAILABLE: { status: 403, human: 'The trusted mandate issuer keys could not be fetched.' },
  MANDATE_ISSUER_UNKNOWN: { status: 403, human: 'The AP2 mandate is signed by a key none of the merchant\'s trusted_ap2_issuers publishes.' },
  MANDATE_DISCLOSURE_INVALID: { status: 403, human: 'An AP2 mandate disclosure does not match a digest the issuer signed.' },
  MANDATE_KEY_BINDING_INVALID: { status: 403, human: 'The AP2 key-binding JWT is missing, stale, not for this merchant and session, or not signed by the cnf key.' },
  MANDATE_CURRENCY_MISMATCH: { status: 403, human: 'The AP2 mandate is in another currency than the cart.' },
  MANDATE_AMOUNT_OUT_OF_RANGE: { status: 403, human: 'The cart total is not the AP2 mandate\'s payment amount or is outside its amount range.' },
  MANDATE_BUDGET_EXCEEDED: { status: 403, human: 'The cart total exceeds the AP2 mandate\'s budget.' },
  MANDATE_CART_MISMATCH: { status: 403, human: 'The cart (items, quantities or total) is not the one the AP2 checkout mandate approved.' },
  MANDATE_CONSTRAINT_UNSUPPORTED: { status: 403, human: 'The AP2 mandate carries a constraint this gate cannot evaluate, so it cannot be honoured.' },

  // policy verdict
  MANDATE_REQUIRED: { status: 403, human: 'A mandate is required for this amount.' },
  REPUTATION_TOO_LOW: { status: 403, human: 'The agent reputation tier is below the merchant minimum.' },
  OVER_PER_TX_CAP: { status: 403, human: 'The total exceeds the per-transaction cap.' },
  OVER_DAILY_CAP: { status: 403, human: 'The total exceeds the per-agent daily cap.' },
  RATE_LIMITED_HOURLY: { status: 403, human: 'The agent exceeded the hourly purchase limit.' },
  RATE_LIMITED_DAILY: { status: 403, human: 'The agent exceeded the daily purchase limit.' },
  AGENT_BLOCKED: { status: 403, human: 'The agent is blocked by the merchant.' },
  INTENT_FORBIDDEN_KEYWORD: { status: 403, human: 'The buyer intent contains a forbidden keyword.' },
  INTENT_MISMATCH: { status: 403, human: 'The buyer intent does not match the mandate intent.' },
  HOLD_FOR_REVIEW: { status: 202, human: 'The order is held for merchant review.' },
  OK: { status: 200, human: 'Accepted.' },
  MERCHANT_DECLINED: { status: 403, human: 'The merchant declined the held order.' },
  REVIEW_WINDOW_EXPIRED: { status: 403, human: 'The hold review window passed without a decision.' },

  // ingest
  SESSION_NOT_INGESTIBLE: {
    status: 409,
    human: 'This session id cannot be ingested by this key: it is a hosted checkout session or belongs to another project, mode or merchant.',
  },
  RECEIPT_MALFORMED: {
    status: 400,
    human: 'receipt must be a compact JWS: three base64url segments, a JSON header naming its alg (not none), a JSON object payload and a signature.',
  },

  // refunds (SIGNER_MISMATCH and INSUFFICIENT_FUNDS above also answer refunds: 422 and 402)
  ORDER_NOT_REFUNDABLE: { status: 409, human: 'Only an accepted order whose payment this service settled over x402 can be refunded (not a held, rejected or ingested order).' },
  REFUND_EXCEEDS_REMAINING: { status: 422, human: 'The refund would take the order\'s awaiting, pending and succeeded refunds past what the order captured.' },
  REFUND_AUTHORIZATION_EXPIRED: { status: 410, human: 'The refund\'s authorization window (validBefore) has passed; the refund is canceled, create a new one.' },
  REFUND_NOT_AUTHORIZABLE: { status: 409, human: 'The refund is not awaiting authorization: it was authorized, canceled or finished already.' },

  // webhooks
  WEBHOOK_URL_INVALID: { status: 400, human: 'The webhook url breaks a URL rule (https for live endpoints; no private, loopback or link-local address).' },
  WEBHOOK_ENDPOINT_LIMIT: { status: 422, human: 'This project already has the maximum of 16 webhook endpoints in this mode.' },
  WEBHOOK_ENDPOINT_DISABLED: { status: 409, human: 'The webhook endpoint is disabled; re-enable it (PATCH disabled: false) before sending it a test event.' },
} as const satisfies Record<string, { status: number; human: string }>;

export type ReasonCode = keyof typeof REASON_CODES;
export const reasonCodes = Object.keys(REASON_CODES) as ReasonCode[];

export function statusOf(code: ReasonCode): number {
  return REASON_CODES[code].status;
}

export function humanOf(code: ReasonCode): string {
  return REASON_CODES[code].human;
}

/** The one error body: exactly these two keys on every error of every route. */
export const ErrorBody = z
  .object({
    reason_codes: z.array(z.string()).min(1).describe('Stable SCREAMING_SNAKE_CASE codes; the first decides the status.'),
    error_human: z.string().describe('One line for humans; never parse it.'),
  })
  .strict();
export type ErrorBody = z.infer<typeof ErrorBody>;
