import { DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS, type FetchLike, type TransportConfig } from './http.js';
import { buildRawClient, listMethod, method, resource, type RawClient } from './resource.js';

export { verifyWebhook } from './webhooks.js';
export { signRefund, refundTypedData, refundTypedDataV4, RefundSigningError, type RefundSigner, type RefundTypedDataToSign } from './refunds.js';
export * from './errors.js';
export { ListIterator, type Page } from './pagination.js';
export type { RequestOptions, FetchLike } from './http.js';
export type { RawClient } from './resource.js';
export type {
  Merchant,
  CatalogItem,
  Order,
  OrderEventObject,
  OrdersSummary,
  ReceivingConfig,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  WebhookEvent,
  OrderWebhookEvent,
  EndpointTestWebhookEvent,
  WebhookEndpointTestObject,
  MerchantPolicy,
  StoredPolicyVersion,
  ApiKeyObject,
  ApiKeyWithSecret,
  Refund,
  RefundReason,
  RefundStatus,
  RefundEventObject,
  RefundWebhookEvent,
} from '@svc/contract';
// A refund's `receipt`; `verifyReceipt(jws, { kind: 'refund', ... })` from @svc/sdk/agent is the same check.
export { verifyRefundReceipt, RefundReceiptClaims, REFUND_RECEIPT_TYP, type VerifyRefundReceiptOptions } from './receipt.js';
export { POLICY_PRESETS } from '@svc/contract';
export type { VerifyWebhookOptions, VerifyWebhookReason, VerifyWebhookResult } from './webhooks.js';

export type MerchantClientOptions = {
  /** `svc_test_...` or `svc_live_...`: the key decides the mode (`livemode`). */
  apiKey: string;
  /** The API origin, e.g. `https://api.example.com` (no trailing `/v1`). */
  baseUrl: string;
  /** Retries after the first attempt on connection errors, timeouts, 429 and 5xx. Default 2. */
  maxRetries?: number | undefined;
  /** Per-attempt timeout in milliseconds. Default 30 000. */
  timeoutMs?: number | undefined;
  /** A fetch implementation (default: the global fetch). */
  fetch?: FetchLike | undefined;
};

// Each namespace is a table of contract operations: sdk/src/resource.ts turns a route's path
// parameters, body and query into the method's arguments. A list method is iterated (every
// page) or `.page()`d; a merchant-level method takes `merchant_id` in its options.

export const MerchantsResource = resource({
  /** POST /v1/merchants: creates a merchant in the key's mode and mints its receipt key. */
  create: method('merchants.create'),
  /** GET /v1/merchants, newest first: iterate it, or `.page()` for one page. */
  list: listMethod('merchants.list'),
  get: method('merchants.get'),
  /** PATCH /v1/merchants/{id}: only the fields present change. */
  update: method('merchants.update'),
  /**
   * POST /v1/merchants/{id}/domain/verify: after publishing the proof in `domain_verification`
   * (a DNS TXT record or an https file), marks the domain verified so agents reach the merchant
   * at it. Throws DOMAIN_VERIFICATION_FAILED (422) when no proof is found, MERCHANT_DOMAIN_TAKEN
   * (409) when another project verified the domain first.
   */
  verifyDomain: method('merchants.verifyDomain'),
  /** The merchant's public receipt key set (public route). */
  jwks: method('merchants.jwks'),
});
export type MerchantsResource = InstanceType<typeof MerchantsResource>;

export const CatalogResource = resource({
  /** GET /v1/catalog, ordered by category then name. */
  list: method('catalog.list'),
  create: method('catalog.create'),
  update: method('catalog.update'),
  /** Retires the item (available=false); orders and receipts keep their reference. */
  remove: method('catalog.remove'),
});
export type CatalogResource = InstanceType<typeof CatalogResource>;

export const ReceivingResource = resource({
  get: method('receiving.get'),
  /** PUT /v1/receiving: replaces the whole receiving configuration. */
  put: method('receiving.put'),
  /** GET /v1/receiving/balance (live mode): the x402 receiving address's USDC balance, read on chain. */
  balance: method('receiving.balance'),
});
export type ReceivingResource = InstanceType<typeof ReceivingResource>;

export const PolicyResource = resource({
  /** The active version, or `{active: null, version: 0, ...}` when none is published. */
  get: method('policy.get'),
  /** GET /v1/policy/versions: every stored version, newest first, active or not (to compare two). */
  versions: listMethod('policy.versions', { query: 'options' }),
  /** Stores a new inactive version; `publish()` makes it active. */
  put: method('policy.put'),
  /** Validates the draft (merchant, receiving, catalog, newest policy); no side effects. */
  validate: method('policy.validate'),
  /** Validates and publishes; a refused draft throws SvcValidationError (422) with `findings`. */
  publish: method('policy.publish'),
});
export type PolicyResource = InstanceType<typeof PolicyResource>;

export const OrdersResource = resource({
  /**
   * GET /v1/orders, newest first: iterate it, or `.page()` for one page. Filters (`decision`,
   * `agent_id`, `trust_tier`, `created_gte`, `created_lt`, `merchant_id`, and `q`: an order id, a
   * session id or an agent id) combine and hold on every page.
   */
  list: listMethod('orders.list'),
  /** GET /v1/orders/export.csv: every order matching the same filters (no pages), as one CSV string. */
  exportCsv: method('orders.export'),
  /** GET /v1/orders/summary: today, the last 7 and 14 days (calendar days in `tz`, default UTC), holds waiting, failing endpoints. */
  summary: method('orders.summary'),
});
export type OrdersResource = InstanceType<typeof OrdersResource>;

/**
 * Refunds (docs/settlement.md "Refunds"): the money goes back from the merchant's receiving
 * wallet, so a refund is created, then authorized with the merchant's signature:
 * `create` -> `signRefund(account, refund)` -> `authorize(refund.id, { signature })`.
 */
export const RefundsResource = resource({
  /**
   * POST /v1/refunds `{order_id, amount?, reason?, metadata?}` (amount default: what the order has
   * not refunded yet). Answers the refund `requires_authorization` with the typed data to sign.
   * Throws ORDER_NOT_REFUNDABLE (409), REFUND_EXCEEDS_REMAINING (422).
   */
  create: method('refunds.create'),
  /**
   * POST /v1/refunds/{id}/authorize `{signature}`: the refund goes to the chain. Resolves
   * `succeeded` or `failed`, or `pending` while the transfer is unconfirmed (poll `retrieve`).
   * Throws SIGNER_MISMATCH (422), REFUND_AUTHORIZATION_EXPIRED (410), INSUFFICIENT_FUNDS (402,
   * the refund stays authorizable), REFUND_NOT_AUTHORIZABLE (409).
   */
  authorize: method('refunds.authorize'),
  /** GET /v1/refunds/{id}. */
  retrieve: method('refunds.get'),
  /** GET /v1/refunds, newest first; `order_id` gives the refunds of one order. */
  list: listMethod('refunds.list'),
  /** POST /v1/refunds/{id}/cancel: only before authorization (else REFUND_NOT_AUTHORIZABLE, 409). */
  cancel: method('refunds.cancel'),
});
export type RefundsResource = InstanceType<typeof RefundsResource>;

export const SessionsResource = resource({
  /** A checkout session as the merchant sees it (the hosted review of a held session). */
  get: method('sessions.get'),
  /** Approves a held session: runs capture and issues the receipt. */
  approve: method('sessions.approve'),
  decline: method('sessions.decline'),
});
export type SessionsResource = InstanceType<typeof SessionsResource>;

export const WebhookEndpointsResource = resource({
  /** Registers an endpoint; the response carries the `whsec_` secret, shown this once. */
  create: method('webhooks.createEndpoint'),
  list: listMethod('webhooks.listEndpoints'),
  get: method('webhooks.getEndpoint'),
  update: method('webhooks.updateEndpoint'),
  delete: method('webhooks.deleteEndpoint'),
  /** Rolls the secret; the old one keeps signing beside the new one for 24 h. */
  rotateSecret: method('webhooks.rotateSecret'),
  /**
   * Sends a `webhook_endpoint.test` event to this endpoint only (signed, through the normal
   * queue and retries); follow it with `events.get(event_id)`.
   */
  sendTestEvent: method('webhooks.sendTestEvent'),
});
export type WebhookEndpointsResource = InstanceType<typeof WebhookEndpointsResource>;

export const WebhookEventsResource = resource({
  /** GET /v1/events, newest first; `type` and `order_id` (the events of one order) narrow it. */
  list: listMethod('webhooks.listEvents'),
  /** The event with its deliveries and their attempts. */
  get: method('webhooks.getEvent'),
  /** Delivers the same bytes again to every endpoint that currently matches the event (a test event: to the endpoint it tested). */
  replay: method('webhooks.replayEvent'),
});
export type WebhookEventsResource = InstanceType<typeof WebhookEventsResource>;

export class WebhooksResource {
  readonly endpoints: WebhookEndpointsResource;
  readonly events: WebhookEventsResource;
  constructor(raw: RawClient) {
    this.endpoints = new WebhookEndpointsResource(raw);
    this.events = new WebhookEventsResource(raw);
  }
}

/** Reports from a self-hosted gate (idempotent on session.id). */
export const IngestResource = resource({
  session: method('ingest.session'),
  order: method('ingest.order'),
  decision: method('ingest.decision'),
});
export type IngestResource = InstanceType<typeof IngestResource>;

/** Public reputation lookups: never 404; unknown ids read as the neutral default. */
export const ReputationResource = resource({
  agent: method('reputation.agent'),
  merchant: method('reputation.merchant'),
});
export type ReputationResource = InstanceType<typeof ReputationResource>;

export const MeResource = resource({
  /** Resolves the API key: its mode, scopes and project. */
  get: method('me.get'),
});
export type MeResource = InstanceType<typeof MeResource>;

export const KeysResource = resource({
  /** GET /v1/keys: the project's keys in this key's mode, newest first (secrets never listed). */
  list: listMethod('keys.list'),
  /** Mints a key of this key's mode with a subset of its scopes; the `secret` is in this response only. */
  create: method('keys.create'),
  /** A new secret; the old one keeps working for `grace_period_seconds` (default 24 h, 0 = stops now). */
  roll: method('keys.roll', { optionalBody: true }),
  /** Revokes the key now (idempotent). */
  revoke: method('keys.revoke'),
});
export type KeysResource = InstanceType<typeof KeysResource>;

const KEY_PREFIX = /^svc_(test|live)_/;

/**
 * The management API client. Every method returns the typed success body from the contract
 * and throws a typed SvcApiError subclass on an error status.
 *
 * ```ts
 * const svc = new MerchantClient({ apiKey: process.env.SVC_API_KEY!, baseUrl: 'https://api.example.com' });
 * const merchant = await svc.merchants.create({ slug: 'coffee', name: 'Coffee', domain: 'coffee.example.com', receiving });
 * for await (const order of svc.orders.list()) console.log(order.id);
 * ```
 */
export class MerchantClient {
  /** From the key prefix: `svc_live_` keys are live, `svc_test_` keys are test. */
  readonly livemode: boolean;
  readonly baseUrl: string;
  /** The typed ts-rest client over the whole contract (responses are returned, not thrown). */
  readonly raw: RawClient;
  readonly merchants: MerchantsResource;
  readonly catalog: CatalogResource;
  readonly receiving: ReceivingResource;
  readonly policy: PolicyResource;
  readonly orders: OrdersResource;
  readonly sessions: SessionsResource;
  /** Refunds: create, authorize (with `signRefund`), retrieve, list, cancel. */
  readonly refunds: RefundsResource;
  readonly webhooks: WebhooksResource;
  readonly ingest: IngestResource;
  readonly reputation: ReputationResource;
  readonly me: MeResource;
  /** API keys: list, create (restricted keys too), roll, revoke. */
  readonly keys: KeysResource;

  constructor(options: MerchantClientOptions) {
    const m = KEY_PREFIX.exec(options.apiKey ?? '');
    if (!m) throw new TypeError('apiKey must be an API key starting with svc_test_ or svc_live_');
    if (!options.baseUrl) throw new TypeError('baseUrl is required, e.g. https://api.example.com');
    this.livemode = m[1] === 'live';
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    const config: TransportConfig = {
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
      maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      headers: { authorization: `Bearer ${options.apiKey}` },
      idempotentPosts: true,
    };
    this.raw = buildRawClient(config, this.baseUrl);
    this.merchants = new MerchantsResource(this.raw);
    this.catalog = new CatalogResource(this.raw);
    this.receiving = new ReceivingResource(this.raw);
    this.policy = new PolicyResource(this.raw);
    this.orders = new OrdersResource(this.raw);
    this.sessions = new SessionsResource(this.raw);
    this.refunds = new RefundsResource(this.raw);
    this.webhooks = new WebhooksResource(this.raw);
    this.ingest = new IngestResource(this.raw);
    this.reputation = new ReputationResource(this.raw);
    this.me = new MeResource(this.raw);
    this.keys = new KeysResource(this.raw);
  }
}
