import { initClient, type AppRoute } from '@ts-rest/core';
import { contract } from '@svc/contract';
import { DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS, pathParam, tsRestFetcher, type FetchLike, type RequestOptions, type TransportConfig } from './http.js';
import { ListIterator } from './pagination.js';
import { unwrap, type RouteBody, type RouteQuery, type SuccessBody } from './types.js';

export { verifyWebhook } from './webhooks.js';
export * from './errors.js';
export { ListIterator, type Page } from './pagination.js';
export type { RequestOptions, FetchLike } from './http.js';
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
} from '@svc/contract';
export { POLICY_PRESETS } from '@svc/contract';
export type { VerifyWebhookOptions, VerifyWebhookReason, VerifyWebhookResult } from './webhooks.js';

type C = typeof contract;
type Item<P> = P extends { data: Array<infer T> } ? T : never;

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

/** `merchant_id` scoping of the merchant-level routes, plus the per-call controls. */
type Scoped<R extends AppRoute> = RequestOptions & RouteQuery<R>;

function buildRaw(config: TransportConfig, baseUrl: string) {
  return initClient(contract, { baseUrl, baseHeaders: {}, api: tsRestFetcher(config), jsonQuery: false });
}
/** The typed ts-rest client over the whole contract, with this client's auth, retries and timeouts. */
export type RawClient = ReturnType<typeof buildRaw>;

function splitScoped<Q extends object>(opts: (RequestOptions & Q) | undefined): { query: Q; svc: RequestOptions } {
  const { idempotencyKey, signal, timeoutMs, maxRetries, ...query } = opts ?? ({} as RequestOptions & Q);
  return { query: query as unknown as Q, svc: { idempotencyKey, signal, timeoutMs, maxRetries } };
}

export class MerchantsResource {
  constructor(private readonly raw: RawClient) {}
  /** POST /v1/merchants: creates a merchant in the key's mode and mints its receipt key. */
  async create(body: RouteBody<C['merchants']['create']>, options?: RequestOptions): Promise<SuccessBody<C['merchants']['create']>> {
    return unwrap(await this.raw.merchants.create({ body, svc: options }));
  }
  /** GET /v1/merchants, newest first: iterate it, or `.page()` for one page. */
  list(query: RouteQuery<C['merchants']['list']> = {}, options?: RequestOptions) {
    type P = SuccessBody<C['merchants']['list']>;
    return new ListIterator<Item<P>, P>(
      async (cursor) => unwrap(await this.raw.merchants.list({ query: { ...query, cursor }, svc: options })),
      query.cursor,
    );
  }
  async get(id: string, options?: RequestOptions): Promise<SuccessBody<C['merchants']['get']>> {
    return unwrap(await this.raw.merchants.get({ params: { id: pathParam('id', id) }, svc: options }));
  }
  /** PATCH /v1/merchants/{id}: only the fields present change. */
  async update(id: string, body: RouteBody<C['merchants']['update']>, options?: RequestOptions): Promise<SuccessBody<C['merchants']['update']>> {
    return unwrap(await this.raw.merchants.update({ params: { id: pathParam('id', id) }, body, svc: options }));
  }
  /**
   * POST /v1/merchants/{id}/domain/verify: after publishing the proof in `domain_verification`
   * (a DNS TXT record or an https file), marks the domain verified so agents reach the merchant
   * at it. Throws DOMAIN_VERIFICATION_FAILED (422) when no proof is found, MERCHANT_DOMAIN_TAKEN
   * (409) when another project verified the domain first.
   */
  async verifyDomain(id: string, options?: RequestOptions): Promise<SuccessBody<C['merchants']['verifyDomain']>> {
    return unwrap(await this.raw.merchants.verifyDomain({ params: { id: pathParam('id', id) }, svc: options }));
  }
  /** The merchant's public receipt key set (public route). */
  async jwks(id: string, options?: RequestOptions): Promise<SuccessBody<C['merchants']['jwks']>> {
    return unwrap(await this.raw.merchants.jwks({ params: { id: pathParam('id', id) }, svc: options }));
  }
}

export class CatalogResource {
  constructor(private readonly raw: RawClient) {}
  /** GET /v1/catalog, ordered by category then name. */
  async list(options?: Scoped<C['catalog']['list']>): Promise<SuccessBody<C['catalog']['list']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.catalog.list({ query, svc }));
  }
  async create(body: RouteBody<C['catalog']['create']>, options?: Scoped<C['catalog']['create']>): Promise<SuccessBody<C['catalog']['create']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.catalog.create({ body, query, svc }));
  }
  async update(
    sku: string,
    body: RouteBody<C['catalog']['update']>,
    options?: Scoped<C['catalog']['update']>,
  ): Promise<SuccessBody<C['catalog']['update']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.catalog.update({ params: { sku: pathParam('sku', sku) }, body, query, svc }));
  }
  /** Retires the item (available=false); orders and receipts keep their reference. */
  async remove(sku: string, options?: Scoped<C['catalog']['remove']>): Promise<void> {
    const { query, svc } = splitScoped(options);
    unwrap(await this.raw.catalog.remove({ params: { sku: pathParam('sku', sku) }, query, svc }));
  }
}

export class ReceivingResource {
  constructor(private readonly raw: RawClient) {}
  async get(options?: Scoped<C['receiving']['get']>): Promise<SuccessBody<C['receiving']['get']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.receiving.get({ query, svc }));
  }
  /** PUT /v1/receiving: replaces the whole receiving configuration. */
  async put(body: RouteBody<C['receiving']['put']>, options?: Scoped<C['receiving']['put']>): Promise<SuccessBody<C['receiving']['put']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.receiving.put({ body, query, svc }));
  }
}

export class PolicyResource {
  constructor(private readonly raw: RawClient) {}
  /** The active version, or `{active: null, version: 0, ...}` when none is published. */
  async get(options?: Scoped<C['policy']['get']>): Promise<SuccessBody<C['policy']['get']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.policy.get({ query, svc }));
  }
  /** GET /v1/policy/versions: every stored version, newest first, active or not (to compare two). */
  versions(options?: Scoped<C['policy']['versions']>) {
    type P = SuccessBody<C['policy']['versions']>;
    const { query, svc } = splitScoped(options);
    return new ListIterator<Item<P>, P>(async (cursor) => unwrap(await this.raw.policy.versions({ query: { ...query, cursor }, svc })), query.cursor);
  }
  /** Stores a new inactive version; `publish()` makes it active. */
  async put(body: RouteBody<C['policy']['put']>, options?: Scoped<C['policy']['put']>): Promise<SuccessBody<C['policy']['put']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.policy.put({ body, query, svc }));
  }
  /** Validates the draft (merchant, receiving, catalog, newest policy); no side effects. */
  async validate(options?: Scoped<C['policy']['validate']>): Promise<SuccessBody<C['policy']['validate']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.policy.validate({ query, svc }));
  }
  /** Validates and publishes; a refused draft throws SvcValidationError (422) with `findings`. */
  async publish(options?: Scoped<C['policy']['publish']>): Promise<SuccessBody<C['policy']['publish']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.policy.publish({ query, svc }));
  }
}

export class OrdersResource {
  constructor(private readonly raw: RawClient) {}
  /**
   * GET /v1/orders, newest first: iterate it, or `.page()` for one page. Filters (`decision`,
   * `agent_id`, `trust_tier`, `created_gte`, `created_lt`, `merchant_id`) combine and hold on every page.
   */
  list(query: RouteQuery<C['orders']['list']> = {}, options?: RequestOptions) {
    type P = SuccessBody<C['orders']['list']>;
    return new ListIterator<Item<P>, P>(async (cursor) => unwrap(await this.raw.orders.list({ query: { ...query, cursor }, svc: options })), query.cursor);
  }
  /** GET /v1/orders/summary: today, the last 7 and 14 days (calendar days in `tz`, default UTC), holds waiting, failing endpoints. */
  async summary(options?: Scoped<C['orders']['summary']>): Promise<SuccessBody<C['orders']['summary']>> {
    const { query, svc } = splitScoped(options);
    return unwrap(await this.raw.orders.summary({ query, svc }));
  }
}

export class SessionsResource {
  constructor(private readonly raw: RawClient) {}
  /** A checkout session as the merchant sees it (the hosted review of a held session). */
  async get(id: string, options?: RequestOptions): Promise<SuccessBody<C['sessions']['get']>> {
    return unwrap(await this.raw.sessions.get({ params: { id: pathParam('id', id) }, svc: options }));
  }
  /** Approves a held session: runs capture and issues the receipt. */
  async approve(id: string, options?: RequestOptions): Promise<SuccessBody<C['sessions']['approve']>> {
    return unwrap(await this.raw.sessions.approve({ params: { id: pathParam('id', id) }, svc: options }));
  }
  async decline(id: string, options?: RequestOptions): Promise<SuccessBody<C['sessions']['decline']>> {
    return unwrap(await this.raw.sessions.decline({ params: { id: pathParam('id', id) }, svc: options }));
  }
}

type W = C['webhooks'];

export class WebhookEndpointsResource {
  constructor(private readonly raw: RawClient) {}
  /** Registers an endpoint; the response carries the `whsec_` secret, shown this once. */
  async create(body: RouteBody<W['createEndpoint']>, options?: RequestOptions): Promise<SuccessBody<W['createEndpoint']>> {
    return unwrap(await this.raw.webhooks.createEndpoint({ body, svc: options }));
  }
  list(query: RouteQuery<W['listEndpoints']> = {}, options?: RequestOptions) {
    type P = SuccessBody<W['listEndpoints']>;
    return new ListIterator<Item<P>, P>(
      async (cursor) => unwrap(await this.raw.webhooks.listEndpoints({ query: { ...query, cursor }, svc: options })),
      query.cursor,
    );
  }
  async get(id: string, options?: RequestOptions): Promise<SuccessBody<W['getEndpoint']>> {
    return unwrap(await this.raw.webhooks.getEndpoint({ params: { id: pathParam('id', id) }, svc: options }));
  }
  async update(id: string, body: RouteBody<W['updateEndpoint']>, options?: RequestOptions): Promise<SuccessBody<W['updateEndpoint']>> {
    return unwrap(await this.raw.webhooks.updateEndpoint({ params: { id: pathParam('id', id) }, body, svc: options }));
  }
  async delete(id: string, options?: RequestOptions): Promise<void> {
    unwrap(await this.raw.webhooks.deleteEndpoint({ params: { id: pathParam('id', id) }, svc: options }));
  }
  /** Rolls the secret; the old one keeps signing beside the new one for 24 h. */
  async rotateSecret(id: string, options?: RequestOptions): Promise<SuccessBody<W['rotateSecret']>> {
    return unwrap(await this.raw.webhooks.rotateSecret({ params: { id: pathParam('id', id) }, svc: options }));
  }
  /**
   * Sends a `webhook_endpoint.test` event to this endpoint only (signed, through the normal
   * queue and retries); follow it with `events.get(event_id)`.
   */
  async sendTestEvent(id: string, options?: RequestOptions): Promise<SuccessBody<W['sendTestEvent']>> {
    return unwrap(await this.raw.webhooks.sendTestEvent({ params: { id: pathParam('id', id) }, svc: options }));
  }
}

export class WebhookEventsResource {
  constructor(private readonly raw: RawClient) {}
  /** GET /v1/events, newest first; `type` and `order_id` (the events of one order) narrow it. */
  list(query: RouteQuery<W['listEvents']> = {}, options?: RequestOptions) {
    type P = SuccessBody<W['listEvents']>;
    return new ListIterator<Item<P>, P>(async (cursor) => unwrap(await this.raw.webhooks.listEvents({ query: { ...query, cursor }, svc: options })), query.cursor);
  }
  /** The event with its deliveries and their attempts. */
  async get(id: string, options?: RequestOptions): Promise<SuccessBody<W['getEvent']>> {
    return unwrap(await this.raw.webhooks.getEvent({ params: { id: pathParam('id', id) }, svc: options }));
  }
  /** Delivers the same bytes again to every endpoint that currently matches the event (a test event: to the endpoint it tested). */
  async replay(id: string, options?: RequestOptions): Promise<SuccessBody<W['replayEvent']>> {
    return unwrap(await this.raw.webhooks.replayEvent({ params: { id: pathParam('id', id) }, svc: options }));
  }
}

export class WebhooksResource {
  readonly endpoints: WebhookEndpointsResource;
  readonly events: WebhookEventsResource;
  constructor(raw: RawClient) {
    this.endpoints = new WebhookEndpointsResource(raw);
    this.events = new WebhookEventsResource(raw);
  }
}

/** Reports from a self-hosted gate (idempotent on session.id). */
export class IngestResource {
  constructor(private readonly raw: RawClient) {}
  async session(body: RouteBody<C['ingest']['session']>, options?: RequestOptions): Promise<SuccessBody<C['ingest']['session']>> {
    return unwrap(await this.raw.ingest.session({ body, svc: options }));
  }
  async order(body: RouteBody<C['ingest']['order']>, options?: RequestOptions): Promise<SuccessBody<C['ingest']['order']>> {
    return unwrap(await this.raw.ingest.order({ body, svc: options }));
  }
  async decision(body: RouteBody<C['ingest']['decision']>, options?: RequestOptions): Promise<SuccessBody<C['ingest']['decision']>> {
    return unwrap(await this.raw.ingest.decision({ body, svc: options }));
  }
}

/** Public reputation lookups: never 404; unknown ids read as the neutral default. */
export class ReputationResource {
  constructor(private readonly raw: RawClient) {}
  async agent(agentId: string, options?: RequestOptions): Promise<SuccessBody<C['reputation']['agent']>> {
    return unwrap(await this.raw.reputation.agent({ params: { agentId: pathParam('agentId', agentId) }, svc: options }));
  }
  async merchant(merchantId: string, options?: RequestOptions): Promise<SuccessBody<C['reputation']['merchant']>> {
    return unwrap(await this.raw.reputation.merchant({ params: { merchantId: pathParam('merchantId', merchantId) }, svc: options }));
  }
}

export class MeResource {
  constructor(private readonly raw: RawClient) {}
  /** Resolves the API key: its mode, scopes and project. */
  async get(options?: RequestOptions): Promise<SuccessBody<C['me']['get']>> {
    return unwrap(await this.raw.me.get({ svc: options }));
  }
}

export class KeysResource {
  constructor(private readonly raw: RawClient) {}
  /** GET /v1/keys: the project's keys in this key's mode, newest first (secrets never listed). */
  list(query: RouteQuery<C['keys']['list']> = {}, options?: RequestOptions) {
    type P = SuccessBody<C['keys']['list']>;
    return new ListIterator<Item<P>, P>(async (cursor) => unwrap(await this.raw.keys.list({ query: { ...query, cursor }, svc: options })), query.cursor);
  }
  /** Mints a key of this key's mode with a subset of its scopes; the `secret` is in this response only. */
  async create(body: RouteBody<C['keys']['create']>, options?: RequestOptions): Promise<SuccessBody<C['keys']['create']>> {
    return unwrap(await this.raw.keys.create({ body, svc: options }));
  }
  /** A new secret; the old one keeps working for `grace_period_seconds` (default 24 h, 0 = stops now). */
  async roll(id: string, body: RouteBody<C['keys']['roll']> = {}, options?: RequestOptions): Promise<SuccessBody<C['keys']['roll']>> {
    return unwrap(await this.raw.keys.roll({ params: { id: pathParam('id', id) }, body, svc: options }));
  }
  /** Revokes the key now (idempotent). */
  async revoke(id: string, options?: RequestOptions): Promise<SuccessBody<C['keys']['revoke']>> {
    return unwrap(await this.raw.keys.revoke({ params: { id: pathParam('id', id) }, svc: options }));
  }
}

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
    this.raw = buildRaw(config, this.baseUrl);
    this.merchants = new MerchantsResource(this.raw);
    this.catalog = new CatalogResource(this.raw);
    this.receiving = new ReceivingResource(this.raw);
    this.policy = new PolicyResource(this.raw);
    this.orders = new OrdersResource(this.raw);
    this.sessions = new SessionsResource(this.raw);
    this.webhooks = new WebhooksResource(this.raw);
    this.ingest = new IngestResource(this.raw);
    this.reputation = new ReputationResource(this.raw);
    this.me = new MeResource(this.raw);
    this.keys = new KeysResource(this.raw);
  }
}
