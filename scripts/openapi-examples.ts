/** Request and response examples for the main operations, keyed by operationId (real shapes, shortened ids). */
type Example = { request?: unknown; responses?: Record<string, unknown> };

const MERCHANT = {
  id: 'mrch_01jz0c8q4m6w3v9r2t5y7x1k0a',
  slug: 'acme-coffee',
  name: 'Acme Coffee',
  domain: 'shop.acme.example',
  domain_status: 'unverified',
  domain_verification: {
    token: '3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e',
    dns_txt: { name: '_svc-checkout.shop.acme.example', value: 'svc-verify=3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e' },
    https_file: { url: 'https://shop.acme.example/.well-known/svc-checkout-verification.txt', content: 'svc-verify=3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e' },
    verified_at: null,
  },
  receiving: { x402: { chain: 'base-sepolia', address: '0x1111111111111111111111111111111111111111', asset: 'USDC' }, mock: { account: 'acct_demo' } },
  rails: ['x402', 'mock'],
  receipt_kid: 'mrch_01jz0c8q4m6w3v9r2t5y7x1k0a-receipts-v1',
  receipt_pub_jwk: { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', kid: 'mrch_01jz0c8q4m6w3v9r2t5y7x1k0a-receipts-v1', alg: 'EdDSA', use: 'sig' },
  trusted_svc_jwks_url: null,
  trusted_ap2_issuers: [],
  livemode: false,
  is_default: true,
  created_at: '2026-11-21T10:00:00.000Z',
  updated_at: '2026-11-21T10:00:00.000Z',
};

const PRODUCT = {
  id: 'prod_01jz0c9b2d4f6h8k0m2p4r6t8v',
  sku: 'espresso-250g',
  name: 'Espresso beans 250 g',
  price: { amount: '12.50', currency: 'USD' },
  available: true,
  category: 'coffee',
  unit: 'each',
  created_at: '2026-11-21T10:01:00.000Z',
  updated_at: '2026-11-21T10:01:00.000Z',
};


const REFUND_EXAMPLE = {
  id: 're_01jz0d2a4c6e8g0j2m4p6r8t0v',
  order_id: 'ord_01jz0cf9t1v3x5z7b9d1f3h5k7',
  merchant_id: 'mrch_01jz0c8q4m6w3v9r2t5y7x1k0a',
  status: 'requires_authorization',
  amount: '10.00',
  amount_base_units: '10000000',
  currency: 'USD',
  reason: 'requested_by_customer',
  metadata: null,
  chain: 'base-sepolia',
  transaction: null,
  receipt: null,
  failure: null,
  authorization_request: {
    typed_data: {
      domain: { name: 'USDC', version: '2', chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' },
      types: {
        TransferWithAuthorization: [
          { name: 'from', type: 'address' },
          { name: 'to', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'validAfter', type: 'uint256' },
          { name: 'validBefore', type: 'uint256' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'TransferWithAuthorization',
      message: {
        from: '0x1111111111111111111111111111111111111111',
        to: '0x2222222222222222222222222222222222222222',
        value: '10000000',
        validAfter: 1795255440,
        validBefore: 1795256100,
        nonce: '0x5f2a9c1e7b3d4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a',
      },
    },
    next: 'POST /v1/refunds/re_01jz0d2a4c6e8g0j2m4p6r8t0v/authorize',
  },
  livemode: false,
  created_at: '2026-11-21T11:04:00.000Z',
  updated_at: '2026-11-21T11:04:00.000Z',
};

export const OPENAPI_EXAMPLES: Record<string, Example> = {
  createRefund: {
    request: { order_id: 'ord_01jz0cf9t1v3x5z7b9d1f3h5k7', amount: '10.00', reason: 'requested_by_customer' },
    responses: {
      '201': REFUND_EXAMPLE,
      '422': { reason_codes: ['REFUND_EXCEEDS_REMAINING'], error_human: 'The refund would take the order\'s awaiting, pending and succeeded refunds past what the order captured.' },
    },
  },
  createMerchant: {
    request: {
      slug: 'acme-coffee',
      name: 'Acme Coffee',
      domain: 'shop.acme.example',
      receiving: { x402: { chain: 'base-sepolia', address: '0x1111111111111111111111111111111111111111' }, mock: { account: 'acct_demo' } },
    },
    responses: { '201': MERCHANT, '409': { reason_codes: ['MERCHANT_SLUG_TAKEN'], error_human: 'The slug acme-coffee belongs to another project.' } },
  },
  verifyMerchantDomain: {
    responses: {
      '200': {
        ...MERCHANT,
        domain_status: 'verified',
        domain_verification: { ...MERCHANT.domain_verification, verified_at: '2026-11-21T10:05:00.000Z' },
        updated_at: '2026-11-21T10:05:00.000Z',
      },
      '409': { reason_codes: ['MERCHANT_DOMAIN_TAKEN'], error_human: 'shop.acme.example was verified by another project first.' },
      '422': {
        reason_codes: ['DOMAIN_VERIFICATION_FAILED'],
        error_human:
          'No proof of control of shop.acme.example was found: no TXT record "svc-verify=3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e" at _svc-checkout.shop.acme.example, and https://shop.acme.example/.well-known/svc-checkout-verification.txt did not answer 200 with the line "svc-verify=3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e".',
      },
    },
  },
  listMerchants: { responses: { '200': { data: [MERCHANT], has_more: false, next_cursor: null } } },
  createCatalogItem: {
    request: { sku: 'espresso-250g', name: 'Espresso beans 250 g', price: { amount: '12.50', currency: 'usd' }, category: 'coffee', unit: 'each' },
    responses: {
      '201': PRODUCT,
      '400': { reason_codes: ['PRICE_AMOUNT_INVALID'], error_human: 'body.price.amount: must be a decimal string like "12.50"' },
    },
  },
  listCatalogItems: { responses: { '200': { items: [PRODUCT] } } },
  putReceiving: {
    request: { receiving: { x402: { chain: 'base-sepolia', address: '0x1111111111111111111111111111111111111111', asset: 'usdc' } } },
    responses: { '200': { receiving: { x402: { chain: 'base-sepolia', address: '0x1111111111111111111111111111111111111111', asset: 'USDC' } } } },
  },
  putPolicy: {
    request: { body: { requireMandateOverUsd: 50, maxPerTransactionUsd: 500, minReputationTier: 'standard' }, note: 'launch policy' },
    responses: { '201': { id: 'pol_01jz0cb3n5q7s9u1w3y5a7c9e1', version: 1, hash: 'd3f1c5a0e2b4967f8a1c3e5d7b9f0a2c4e6d8b0a1c3e5f7a9b1d3f5e7c9a1b3d', active: false } },
  },
  validateConfig: {
    responses: {
      '200': {
        ok: false,
        findings: [
          { code: 'RECEIVING_NO_RAIL_ENABLED', human: 'receiving: at least one rail must be configured.', severity: 'error' },
          { code: 'POLICY_REJECTS_NEW_AGENTS', human: 'policy.requireMandateOverUsd: 0 requires a mandate on every purchase, so every agent without one is rejected (MANDATE_REQUIRED).', severity: 'warning' },
        ],
      },
    },
  },
  publishConfig: {
    responses: {
      '200': { published: true, ok: true, active_policy_version: 1 },
      '422': {
        published: false,
        ok: false,
        findings: [{ code: 'POLICY_FIELD_UNKNOWN', human: 'policy.maxPerTxUsd: is not a MerchantPolicy field.', severity: 'error' }],
        reason_codes: ['CONFIG_INVALID'],
        error_human: 'Publish refused: 1 finding(s); first: policy.maxPerTxUsd: is not a MerchantPolicy field.',
      },
    },
  },
  createCheckout: {
    request: { agent_id: '3f1b6c2e-8d4a-4f7e-9b1c-2a5d7e9f0b13', items: [{ sku: 'espresso-250g', qty: 2 }], idempotency_key: 'cart-42' },
    responses: {
      '201': {
        session_id: 'sess_01jz0cd7r9t1v3x5z7b9d1f3h5',
        state: 'awaiting_payment',
        livemode: false,
        total: { currency: 'USD', subtotal: '25.00', tax: '0.00', total: '25.00' },
        payment_required: {
          rail: 'x402',
          scheme: 'x402-exact',
          payTo: '0x1111111111111111111111111111111111111111',
          amount: '25.00',
          currency: 'USD',
          amountBaseUnits: '25000000',
          chain: 'base-sepolia',
          chainId: 84532,
          asset: 'USDC',
          verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
          eip712Domain: { name: 'USDC', version: '2' },
          validUntil: 1795260835,
        },
        expires_at: 1795260835,
        next: 'POST /m/mrch_01jz0c8q4m6w3v9r2t5y7x1k0a/agent/checkout/sess_01jz0cd7r9t1v3x5z7b9d1f3h5/settle {"payment":{"scheme":"x402-exact","authorization":{...},"signature":"0x..."}}',
      },
    },
  },
  settleCheckout: {
    request: {
      payment: {
        scheme: 'x402-exact',
        authorization: {
          from: '0x2222222222222222222222222222222222222222',
          to: '0x1111111111111111111111111111111111111111',
          value: '25000000',
          validAfter: 1795259335,
          validBefore: 1795260235,
          nonce: '0x5c3f0e8b7a6d4c2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e',
        },
        signature: '0x' + 'ab'.repeat(65),
      },
    },
    responses: {
      '200': {
        status: 'accepted',
        order_id: 'ord_01jz0cf9t1v3x5z7b9d1f3h5k7',
        receipt: 'eyJhbGciOiJFZERTQSIsInR5cCI6InN2Yy1yZWNlaXB0K2p3cyIsImtpZCI6Im1yY2hfLi4uIn0.eyJpc3MiOiJzdmMtY2hlY2tvdXQiLCJzdWIiOiJyY3B0Xy4uLiJ9.c2lnbmF0dXJl',
        fulfillment: { rail: 'x402', reference: '0x9e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e1d' },
      },
      '402': { status: 'payment_invalid', reason_codes: ['SIGNER_MISMATCH'], error_human: 'The signature recovers to another address: sign under the EIP-712 domain {name: "USDC", version: "2"}.' },
      '403': { status: 'rejected', reason_codes: ['MANDATE_REQUIRED'], error_human: 'A mandate is required for this amount.' },
    },
  },
  listOrders: {
    responses: {
      '200': {
        data: [
          {
            id: 'ord_01jz0cf9t1v3x5z7b9d1f3h5k7',
            source: 'hosted',
            session_id: 'sess_01jz0cd7r9t1v3x5z7b9d1f3h5',
            merchant_id: 'mrch_01jz0c8q4m6w3v9r2t5y7x1k0a',
            agent_id: '3f1b6c2e-8d4a-4f7e-9b1c-2a5d7e9f0b13',
            decision: 'accept',
            total: { currency: 'USD', subtotal: '25.00', tax: '0.00', total: '25.00' },
            rail_name: 'x402',
            settlement_ref: '0x9e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e1d',
            receipt_id: 'rcpt_01jz0cf9t2w4y6a8c0e2g4j6m8',
            mandate_type: 'none',
            trust_tier: 'standard',
            livemode: false,
            amount_refunded: '10.00',
            refund_status: 'partial',
            created_at: '2026-11-21T10:05:00.000Z',
          },
        ],
        has_more: false,
        next_cursor: null,
      },
    },
  },
  getOrdersSummary: {
    responses: {
      '200': {
        currency: 'USDC',
        today: { accepted_volume: '37.50', accepted_count: 2, orders_by_decision: { accept: 2, reject: 1, hold: 1 } },
        week: { accepted_volume: '412.26', accepted_count: 20, orders_by_decision: { accept: 20, reject: 4, hold: 2 } },
        days: Array.from({ length: 14 }, (_, i) => ({
          date: `2026-11-${String(8 + i).padStart(2, '0')}`,
          accepted_volume: i === 13 ? '37.50' : i >= 7 ? '62.46' : '0.00',
          accepted_count: i === 13 ? 2 : i >= 7 ? 3 : 0,
        })),
        holds_waiting: 1,
        failing_endpoints: 0,
      },
    },
  },
  listPolicyVersions: {
    responses: {
      '200': {
        data: [
          {
            id: 'pol_01jz0cb8k2m4p6r8t0v2x4z6b8',
            version: 2,
            hash: '5d41402abc4b2a76b9719d911017c592aa0c2d5c7b1e6f3a9d8c7b6a5f4e3d2c',
            active: false,
            body: { maxPerTransactionUsd: 250, holdForReviewBelowTier: 'standard' },
            note: 'stricter holds',
            created_at: '2026-11-21T11:00:00.000Z',
          },
          {
            id: 'pol_01jz0ca4g6j8m0p2r4t6w8y0a2',
            version: 1,
            hash: 'dc769e7f0ae94716d4e19ced9ebedb4a3f134ba61205dc0e8655fc74281478d6',
            active: true,
            body: { maxPerTransactionUsd: 100 },
            note: 'first policy',
            created_at: '2026-11-21T10:02:00.000Z',
          },
        ],
        has_more: false,
        next_cursor: null,
      },
    },
  },
  createWebhookEndpoint: {
    request: { url: 'https://shop.acme.example/hooks/svc', enabled_events: ['order.settled'] },
  },
  sendWebhookTestEvent: {
    responses: {
      '200': { event_id: 'evt_01jz0cg2h4k6m8p0r2t4w6y8a0', deliveries: [{ endpoint_id: 'whk_01jz0ce5n7q9s1u3w5y7a9c1e3', status: 'pending' }] },
      '409': { reason_codes: ['WEBHOOK_ENDPOINT_DISABLED'], error_human: 'The webhook endpoint is disabled; re-enable it (PATCH disabled: false) before sending it a test event.' },
    },
  },
  getAgentReputation: { responses: { '200': { agentId: '3f1b6c2e-8d4a-4f7e-9b1c-2a5d7e9f0b13', score: 510, tier: 'standard', known: true } } },
};

export const TAG_DESCRIPTIONS: Record<string, string> = {
  Agent: 'Public agent protocol under /m/<merchant>/ (or the root of a discovery host or merchant domain): manifest, catalog, checkout, settle.',
  Catalog: 'The merchant\'s products; prices are exact decimal strings.',
  Health: 'Liveness and readiness probes.',
  Identity: 'Who the API key is: mode, scopes and project.',
  Ingest: 'Reports from self-hosted deployments that run the gate locally.',
  Merchants: 'Merchants, their receiving destination and receipt signing keys.',
  Orders: 'The order feed (with filters), its summary, and the merchant review of held sessions.',
  Policy: 'Versioned acceptance policies (every stored version listed), validation and publishing.',
  Receiving: 'Where settled funds land, per rail.',
  Reputation: 'Public agent and merchant reputation; never 404, never blocks.',
  Refunds: 'Refunds of accepted orders: the merchant signs an EIP-3009 transfer back to the payer from its receiving wallet; the service carries it.',
  Webhooks: 'Signed webhook endpoints and the events delivered to them.',
  Keys: 'API keys: list, mint (restricted keys too), roll with a grace period, revoke.',
  'Sign-in': 'Merchant sign-in: magic link, browser session, and the command line\'s device-code flow.',
  Operator: 'The admin CLI\'s local channel into a running server (loopback, token file); not for integrators.',
};
