import { initClient, type ClientInferResponseBody } from '@ts-rest/core';
import {
  CHAINS,
  contract,
  humanOf,
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  type ChainName,
  Manifest,
  reasonCodes as knownReasonCodes,
  type CatalogItem,
  type PaymentRequired,
  type ReasonCode,
  type X402Authorization as WireAuthorization,
} from '@svc/contract';
import type { Address, Hex, JsonRpcAccount, LocalAccount, WalletClient } from 'viem';
import type { JWK } from 'jose';
import { SvcApiError, SvcError } from './errors.js';
import {
  DEFAULT_MAX_RETRIES,
  DEFAULT_TIMEOUT_MS,
  pathParam,
  send,
  tsRestFetcher,
  type FetchLike,
  type RequestOptions,
  type TransportConfig,
} from './http.js';
import { fetchJwks, ReceiptVerificationError, verifyReceipt, type ReceiptClaims } from './receipt.js';
import { unwrap, type RouteBody, type SuccessBody } from './types.js';
import { presentAp2Mandate, type Ap2Holder } from './ap2.js';

export { presentAp2Mandate, type Ap2Holder } from './ap2.js';
export { verifyReceipt, ReceiptVerificationError, ReceiptClaims, RECEIPT_ISSUER, RECEIPT_TYP } from './receipt.js';
export * from './errors.js';
export type { RequestOptions, FetchLike } from './http.js';
export type { ReceiptKeySource, ReceiptVerificationReason, VerifyReceiptOptions } from './receipt.js';

type A = typeof contract.agent;

export type { Manifest, CatalogItem, PaymentRequired };
/** A line of a cart: `{sku, qty}`. */
export type CartItem = RouteBody<A['createCheckout']>['items'][number];
/** Everything a checkout takes besides the agent id and the cart (mandate, buyer, intent, rail, idempotency key). */
export type CheckoutOptions = Omit<RouteBody<A['createCheckout']>, 'agent_id' | 'items'>;
export type CheckoutSession = SuccessBody<A['createCheckout']>;
export type SessionView = SuccessBody<A['getCheckout']>;
export type SettleRequest = NonNullable<RouteBody<A['settle']>>;

/** Settle accepted: the order, the signed receipt and the settlement reference (the tx hash for x402). */
export type AcceptedOutcome = ClientInferResponseBody<A['settle'], 200> & { session_id: string };
/** Settle refused the proof of payment; the session stays open and can be paid again. */
export type PaymentInvalidOutcome = Extract<ClientInferResponseBody<A['settle'], 402>, { status: 'payment_invalid' }> & { session_id: string };
/** The gate rejected the order (policy, mandate, reputation), or the merchant declined a hold. */
export type RejectedOutcome = Extract<ClientInferResponseBody<A['settle'], 403>, { status: 'rejected' }> & { session_id: string };
export type WaitOptions = {
  /** Poll interval, default 2 000 ms. */
  intervalMs?: number | undefined;
  /** Give up after this long (ResolutionTimeoutError), default 15 minutes. */
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
};
/**
 * How a hold or a pending settlement ends: accepted, rejected (declined, lapsed), or
 * payment_invalid (the transfer did not land, or a fresh authorization was refused).
 */
export type ResolvedOutcome = AcceptedOutcome | RejectedOutcome | PaymentInvalidOutcome;
/** Held for merchant review: `review_url` is the merchant's view; poll with `waitForResolution`. */
export type HeldOutcome = Extract<ClientInferResponseBody<A['settle'], 202>, { status: 'hold' }> & {
  session_id: string;
  /**
   * Polls until the review ends. When the merchant approves after the held authorization
   * expired, it signs a fresh authorization and settles (no second hold) before returning.
   */
  waitForResolution(options?: WaitOptions): Promise<ResolvedOutcome>;
};
/** The transfer was sent and is not confirmed yet; `waitForResolution` polls until it is settled or released. */
export type PendingOutcome = Extract<ClientInferResponseBody<A['settle'], 202>, { status: 'settlement_pending' }> & {
  session_id: string;
  waitForResolution(options?: WaitOptions): Promise<ResolvedOutcome>;
};
/**
 * The five expected results of a settle, discriminated on `status`. They are results, not
 * errors: each is a normal business outcome an agent must branch on. Errors are thrown only
 * for what is not an outcome of the gate (unknown or expired session, a settled session paid
 * differently, validation, network).
 */
export type SettleOutcome = AcceptedOutcome | HeldOutcome | PendingOutcome | PaymentInvalidOutcome | RejectedOutcome;

/** The session's payment requirement cannot be signed (a card session, a missing field, an unknown chain). */
export class PaymentRequirementError extends SvcError {
  override readonly name: string = 'PaymentRequirementError';
}
/** The manifest could not be read as an svc-checkout manifest. */
export class DiscoveryError extends SvcError {
  override readonly name: string = 'DiscoveryError';
}
/** `waitForResolution` ran out of time; the session is still `lastState`. */
export class ResolutionTimeoutError extends SvcError {
  override readonly name: string = 'ResolutionTimeoutError';
  constructor(
    readonly sessionId: string,
    readonly lastState: SessionView['state'],
  ) {
    super(`session ${sessionId} is still ${lastState}`);
  }
}

/** USDC per chain (decisions.md): the fallback when a requirement omits a domain field. */
export const USDC_CHAINS = {
  base: { chainId: CHAINS.base.chainId, verifyingContract: CHAINS.base.usdc, name: CHAINS.base.domainName, version: CHAINS.base.domainVersion },
  'base-sepolia': {
    chainId: CHAINS['base-sepolia'].chainId,
    verifyingContract: CHAINS['base-sepolia'].usdc,
    name: CHAINS['base-sepolia'].domainName,
    version: CHAINS['base-sepolia'].domainVersion,
  },
} as const satisfies Record<ChainName, { chainId: number; verifyingContract: Address; name: string; version: string }>;

export { TRANSFER_WITH_AUTHORIZATION_TYPES };

/** Clock-skew allowance before now, and lifetime after now, of an authorization (interface 4.12). */
export const VALID_AFTER_SKEW_SECONDS = 600;
export const VALID_FOR_SECONDS = 300;

export type TransferTypedData = {
  domain: { name: string; version: string; chainId: number; verifyingContract: Address };
  types: typeof TRANSFER_WITH_AUTHORIZATION_TYPES;
  primaryType: 'TransferWithAuthorization';
  message: { from: Address; to: Address; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex };
};
/** The settle body `paymentFor` builds: an x402-exact payment, or `{mock: true}` on the mock rail (a SettleRequest). */
export type SignedPayment = { payment: { scheme: 'x402-exact'; authorization: X402Authorization; signature: Hex } | { mock: true } };
/** The contract's X402Authorization as this SDK signs it: unix seconds as integers (the wire also takes decimal strings). */
export type X402Authorization = { [K in keyof WireAuthorization]: K extends 'validAfter' | 'validBefore' ? number : WireAuthorization[K] };

function randomNonce(): Hex {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(32));
  return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * The EIP-712 typed data of a session's x402 payment requirement, and its wire form. Pure:
 * the domain name comes from `eip712Domain` (else the chain table), `chainId` and
 * `verifyingContract` from the requirement (else the table), `value` is exactly
 * `amountBaseUnits`, the nonce is 32 random bytes, the window is now-600 s .. now+300 s.
 */
export function buildTransferAuthorization(
  pr: PaymentRequired,
  from: Address,
  opts: { nowSec?: number; nonce?: Hex } = {},
): { typedData: TransferTypedData; authorization: X402Authorization } {
  if (pr.rail !== 'x402') throw new PaymentRequirementError(`the session is on the ${pr.rail} rail, not x402`);
  if (!pr.chain || !(pr.chain in USDC_CHAINS)) throw new PaymentRequirementError(`unsupported chain ${String(pr.chain)}`);
  const table = USDC_CHAINS[pr.chain];
  if (!pr.payTo || !HEX_ADDRESS.test(pr.payTo)) throw new PaymentRequirementError('the requirement has no valid payTo address');
  if (!pr.amountBaseUnits || !/^\d+$/.test(pr.amountBaseUnits)) throw new PaymentRequirementError('the requirement has no integer amountBaseUnits');
  const verifyingContract = pr.verifyingContract ?? table.verifyingContract;
  if (!HEX_ADDRESS.test(verifyingContract)) throw new PaymentRequirementError('the requirement has an invalid verifyingContract');
  const nowSec = opts.nowSec ?? Math.floor(Date.now() / 1000);
  const validAfter = Math.max(0, nowSec - VALID_AFTER_SKEW_SECONDS);
  const validBefore = nowSec + VALID_FOR_SECONDS;
  const nonce = opts.nonce ?? randomNonce();
  const to = pr.payTo as Address;
  const typedData: TransferTypedData = {
    domain: {
      name: pr.eip712Domain?.name ?? table.name,
      version: pr.eip712Domain?.version ?? table.version,
      chainId: pr.chainId ?? table.chainId,
      verifyingContract: verifyingContract as Address,
    },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization',
    message: { from, to, value: BigInt(pr.amountBaseUnits), validAfter: BigInt(validAfter), validBefore: BigInt(validBefore), nonce },
  };
  return { typedData, authorization: { from, to, value: pr.amountBaseUnits, validAfter, validBefore, nonce } };
}

export type AgentAccount = LocalAccount | JsonRpcAccount;

export type AgentClientOptions = {
  /** The paying wallet: a local account (`privateKeyToAccount`) or a JSON-RPC account with `walletClient`. */
  account: AgentAccount;
  /** Signs for a JSON-RPC account (`eth_signTypedData_v4`); not needed for a local account. */
  walletClient?: WalletClient | undefined;
  /** A stable UUID for this agent: reputation and rate limits attach to it. Default: a random one per client. */
  agentId?: string | undefined;
  fetch?: FetchLike | undefined;
  /** Retries on connection errors, 429 and 5xx. Default 2. */
  maxRetries?: number | undefined;
  /** Per-attempt timeout in milliseconds. Default 30 000. */
  timeoutMs?: number | undefined;
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MANIFEST_PATH = '/.well-known/agentic-checkout.json';

/** `https://shop.example.com`, `shop.example.com`, `<slug>.<discovery domain>`, `https://host/m/<id>/` or the manifest URL itself. */
export function manifestUrlFor(urlOrHost: string): string {
  let input = urlOrHost.trim();
  if (!/^https?:\/\//i.test(input)) {
    const host = input.split('/')[0]!.split(':')[0]!.toLowerCase();
    const local = host === 'localhost' || host.endsWith('.localhost') || /^127\./.test(host) || host === '[::1]';
    input = `${local ? 'http' : 'https'}://${input}`;
  }
  const url = new URL(input);
  url.search = '';
  url.hash = '';
  if (!url.pathname.endsWith(MANIFEST_PATH)) url.pathname = `${url.pathname.replace(/\/+$/, '')}${MANIFEST_PATH}`;
  return url.toString();
}

/**
 * The paying side: discovers merchants and hands out a MerchantHandle per merchant.
 *
 * ```ts
 * const agent = new AgentClient({ account: privateKeyToAccount(key), agentId });
 * const shop = await agent.discover('https://shop.example.com');
 * const outcome = await shop.buy([{ sku: 'coffee', qty: 1 }]);
 * if (outcome.status === 'accepted') await shop.verifyReceipt(outcome.receipt);
 * ```
 */
export class AgentClient {
  readonly account: AgentAccount;
  readonly agentId: string;
  /** @internal */
  readonly transport: TransportConfig;
  private readonly walletClient: WalletClient | undefined;

  constructor(options: AgentClientOptions) {
    if (!options.account) throw new TypeError('account is required');
    if (options.account.type !== 'local' && options.account.type !== 'json-rpc') {
      throw new TypeError(`account must be a local or JSON-RPC account, got ${String((options.account as { type?: unknown }).type)}`);
    }
    if (options.account.type === 'json-rpc' && !options.walletClient) {
      throw new TypeError('a JSON-RPC account needs walletClient to sign typed data');
    }
    if (options.agentId !== undefined && !UUID.test(options.agentId)) throw new TypeError('agentId must be a UUID');
    this.account = options.account;
    this.walletClient = options.walletClient;
    this.agentId = (options.agentId ?? globalThis.crypto.randomUUID()).toLowerCase();
    this.transport = {
      fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
      maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      headers: {},
      idempotentPosts: false,
    };
  }

  get address(): Address {
    return this.account.address;
  }

  /** Reads the merchant's manifest and returns a handle bound to that merchant. */
  async discover(urlOrHost: string, options?: RequestOptions): Promise<MerchantHandle> {
    const manifestUrl = manifestUrlFor(urlOrHost);
    const res = await send(this.transport, { url: manifestUrl, method: 'GET', headers: {}, body: undefined, options });
    if (res.status !== 200) throw SvcApiError.fromResponse(res.status, res.body, res.headers);
    const parsed = Manifest.safeParse(res.body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new DiscoveryError(`${manifestUrl} is not an svc-checkout manifest (${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'})`);
    }
    return new MerchantHandle(this, parsed.data, manifestUrl);
  }

  /** Signs the EIP-3009 authorization for an x402 requirement and returns the settle body. */
  async paymentFor(pr: PaymentRequired): Promise<SignedPayment> {
    if (pr.rail === 'mock') return { payment: { mock: true } };
    const { typedData, authorization } = buildTransferAuthorization(pr, this.account.address);
    const signature = await this.signTypedData(typedData);
    return { payment: { scheme: 'x402-exact', authorization, signature } };
  }

  private async signTypedData(td: TransferTypedData): Promise<Hex> {
    if (this.account.type === 'local') return this.account.signTypedData(td);
    return this.walletClient!.signTypedData({ ...td, account: this.account });
  }
}

function buildAgentRaw(transport: TransportConfig, rewrite: (path: string) => string) {
  return initClient(contract.agent, { baseUrl: '', baseHeaders: {}, api: tsRestFetcher(transport, rewrite), jsonQuery: false });
}
type AgentRaw = ReturnType<typeof buildAgentRaw>;

/** What `pay()` accepts: the session `checkout()` returned, or a poll view still awaiting payment. */
export type PayableSession = Pick<CheckoutSession, 'session_id' | 'payment_required'> | SessionView;

function sessionIdOf(s: PayableSession): string {
  return 'session_id' in s ? s.session_id : s.id;
}

function requirementOf(s: PayableSession): PaymentRequired {
  const pr = 'payment_required' in s ? s.payment_required : s.paymentRequired;
  if (!pr) throw new PaymentRequirementError(`session ${sessionIdOf(s)} is ${'state' in s ? s.state : 'not'} awaiting payment`);
  return pr;
}

function humanFor(code: string | undefined): string {
  return code && (knownReasonCodes as string[]).includes(code) ? humanOf(code as ReasonCode) : 'The order was rejected.';
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/** One merchant, as discovered: catalog, checkout, pay, buy, and receipt verification. */
export class MerchantHandle {
  /** The origin plus the path prefix the manifest advertised (`/m/<id>`, or empty on a merchant's own host). */
  readonly baseUrl: string;
  readonly merchantId: string;
  private readonly raw: AgentRaw;
  private jwksCache: { keys: JWK[] } | null = null;

  constructor(
    private readonly agent: AgentClient,
    readonly manifest: Manifest,
    readonly manifestUrl: string,
  ) {
    this.merchantId = manifest.merchant.id;
    const checkoutUrl = new URL(manifest.checkout_url, manifestUrl);
    const prefix = checkoutUrl.pathname.endsWith('/agent/checkout')
      ? checkoutUrl.pathname.slice(0, -'/agent/checkout'.length)
      : `/m/${encodeURIComponent(this.merchantId)}`;
    this.baseUrl = `${checkoutUrl.origin}${prefix}`;
    // The contract's agent paths are `/m/:merchant/...`; serve them under the advertised prefix.
    const contractPrefix = `/m/${encodeURIComponent(this.merchantId)}`;
    const rewrite = (path: string) => (path.startsWith(contractPrefix) ? this.baseUrl + path.slice(contractPrefix.length) : this.baseUrl + path);
    this.raw = buildAgentRaw(agent.transport, rewrite);
  }

  private get merchantParam() {
    return pathParam('merchant', this.merchantId);
  }

  /** The available catalog items. */
  async catalog(options?: RequestOptions): Promise<CatalogItem[]> {
    return unwrap(await this.raw.catalog({ params: { merchant: this.merchantParam }, svc: options })).items;
  }

  /**
   * Opens a checkout session. An `idempotency_key` is generated when none is given, so a
   * retried create returns the same session instead of opening a second one.
   */
  async checkout(items: CartItem[], options: CheckoutOptions = {}, request?: RequestOptions): Promise<CheckoutSession> {
    const body: RouteBody<A['createCheckout']> = {
      ...options,
      agent_id: this.agent.agentId,
      items,
      idempotency_key: options.idempotency_key ?? `sdk_${globalThis.crypto.randomUUID()}`,
    };
    return unwrap(await this.raw.createCheckout({ params: { merchant: this.merchantParam }, body, svc: request }));
  }

  /** The session as the agent sees it (poll view). */
  async session(sessionId: string, options?: RequestOptions): Promise<SessionView> {
    return unwrap(await this.raw.getCheckout({ params: { merchant: this.merchantParam, id: pathParam('sessionId', sessionId) }, svc: options }));
  }

  /**
   * Pays a session: signs the EIP-3009 authorization for x402 (or sends `{mock: true}` on the
   * mock rail) and settles. Returns the outcome; throws SvcApiError for a session that is
   * unknown (404), expired (410) or already settled with another payment (409).
   */
  async pay(session: PayableSession, options?: RequestOptions): Promise<SettleOutcome> {
    const sessionId = sessionIdOf(session);
    const body = await this.agent.paymentFor(requirementOf(session));
    return this.settle(sessionId, body, options);
  }

  /** Settles with a payment body you built yourself (see `AgentClient.paymentFor`). */
  async settle(sessionId: string, body: SettleRequest, options?: RequestOptions): Promise<SettleOutcome> {
    const res = await this.raw.settle({ params: { merchant: this.merchantParam, id: pathParam('sessionId', sessionId) }, body, svc: options });
    // A 402/403 is an outcome only when it carries the outcome body; other 403s are auth/mode errors.
    const status = (res.body as { status?: unknown } | undefined)?.status;
    if (res.status === 200 && status === 'accepted') return { ...res.body, session_id: sessionId };
    if (res.status === 202 && status === 'hold') {
      const held = res.body as Omit<HeldOutcome, 'session_id' | 'waitForResolution'>;
      return { ...held, session_id: sessionId, waitForResolution: (o?: WaitOptions) => this.waitForResolution(sessionId, o) };
    }
    if (res.status === 202 && status === 'settlement_pending') {
      const pending = res.body as Omit<PendingOutcome, 'session_id' | 'waitForResolution'>;
      return { ...pending, session_id: sessionId, waitForResolution: (o?: WaitOptions) => this.waitForResolution(sessionId, o) };
    }
    if (res.status === 402 && status === 'payment_invalid') return { ...(res.body as Omit<PaymentInvalidOutcome, 'session_id'>), session_id: sessionId };
    if (res.status === 403 && status === 'rejected') return { ...(res.body as Omit<RejectedOutcome, 'session_id'>), session_id: sessionId };
    throw SvcApiError.fromResponse(res.status, res.body, res.headers);
  }

  /**
   * An AP2 mandate for this merchant (an SD-JWT credential from a trusted issuer; with `holder`,
   * the agent key the credential binds, a key-binding JWT for audience this merchant and a fresh
   * nonce): pass it as `buy(items, { mandate })` or `checkout(items, { mandate })`.
   */
  async ap2Mandate(credential: string, holder?: Ap2Holder): Promise<NonNullable<CheckoutOptions['mandate']>> {
    return presentAp2Mandate(credential, { audience: this.merchantId, holder });
  }

  /** checkout + pay in one call. */
  async buy(items: CartItem[], options: CheckoutOptions = {}, request?: RequestOptions): Promise<SettleOutcome> {
    const session = await this.checkout(items, options, request);
    return this.pay(session, request);
  }

  /**
   * Polls a held or settling session until it ends. A hold the merchant approved after its
   * authorization expired comes back `approved`: this signs a fresh authorization and settles
   * it (the gate does not hold it again), then keeps polling if that settlement is pending.
   */
  async waitForResolution(sessionId: string, options: WaitOptions = {}): Promise<ResolvedOutcome> {
    const intervalMs = options.intervalMs ?? 2_000;
    const deadline = Date.now() + (options.timeoutMs ?? 15 * 60_000);
    for (;;) {
      const view = await this.session(sessionId, { signal: options.signal });
      if (view.state === 'accepted' && view.orderId && view.receipt && view.settlement) {
        return { status: 'accepted', order_id: view.orderId, receipt: view.receipt, fulfillment: view.settlement, session_id: sessionId };
      }
      if (view.state === 'rejected' || view.state === 'expired') {
        const codes = view.verdict?.reasonCodes.length ? view.verdict.reasonCodes : view.state === 'expired' ? ['SESSION_EXPIRED'] : [];
        return { status: 'rejected', reason_codes: codes, error_human: humanFor(codes[0]), session_id: sessionId };
      }
      if (view.state === 'awaiting_payment' && view.paymentError) {
        // A pending settlement that did not land: the session is open again and can be paid anew.
        return { status: 'payment_invalid', reason_codes: view.paymentError.reasonCodes, error_human: view.paymentError.errorHuman, session_id: sessionId };
      }
      if (view.state === 'approved' && !view.paymentError) {
        const outcome = await this.pay(view, { signal: options.signal });
        if (outcome.status === 'accepted' || outcome.status === 'rejected' || outcome.status === 'payment_invalid') return outcome;
      } else if (view.state === 'approved' && view.paymentError) {
        return { status: 'payment_invalid', reason_codes: view.paymentError.reasonCodes, error_human: view.paymentError.errorHuman, session_id: sessionId };
      }
      if (Date.now() + intervalMs > deadline) throw new ResolutionTimeoutError(sessionId, view.state);
      await sleep(intervalMs, options.signal);
    }
  }

  /** The merchant's receipt key set (cached on the handle). */
  async jwks(options?: { refresh?: boolean }): Promise<{ keys: JWK[] }> {
    if (!this.jwksCache || options?.refresh) {
      this.jwksCache = await fetchJwks(new URL(this.manifest.jwks_url, this.manifestUrl).toString(), this.agent.transport.fetch);
    }
    return this.jwksCache;
  }

  /**
   * Verifies a receipt from this merchant against its key set (refetched once if the kid is
   * new) and checks that it names this merchant.
   */
  async verifyReceipt(jws: string): Promise<ReceiptClaims> {
    const verify = async (keys: { keys: JWK[] }) => verifyReceipt(jws, { jwks: keys, expected: { merchantId: this.merchantId } });
    try {
      return await verify(await this.jwks());
    } catch (err) {
      if (err instanceof ReceiptVerificationError && err.reason === 'RECEIPT_KID_UNKNOWN') return verify(await this.jwks({ refresh: true }));
      throw err;
    }
  }
}
