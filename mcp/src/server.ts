import { createHash } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { Buyer, CHAINS, CreateCheckoutBody, MandateInput, type PaymentRequired } from '@svc/contract';
import {
  AgentClient,
  DiscoveryError,
  PaymentRequirementError,
  ReceiptVerificationError,
  SvcApiError,
  SvcConnectionError,
  type MerchantHandle,
  type SettleOutcome,
} from '@svc/sdk/agent';
import { privateKeyToAccount } from 'viem/accounts';
import { formatBaseUnits } from './amounts.js';
import type { BuyerConfig } from './config.js';
import { LedgerError, SpendingLedger, type DayTotals } from './ledger.js';

export const SERVER_NAME = 'svc-mcp';
export const SERVER_VERSION = '0.1.0';

/** A purchase or a call the wallet refuses on its own: `code` is the machine reason, `human` one line for the model. */
export class Refusal extends Error {
  override readonly name = 'Refusal';
  constructor(
    readonly code: string,
    readonly human: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(human);
  }
}

export type BuyerServerOptions = {
  /** Removes the key from any text that leaves the process. */
  redact: (text: string) => string;
  /** The clock of the spending day (UTC). */
  now?: () => Date;
  /** Per-attempt HTTP timeout towards merchants, default 30 s. */
  timeoutMs?: number;
};

/** The namespace the service derives a payer's agent id in (server/src/modules/x402/agent-id.ts, docs/agent-protocol.md). */
const X402_PAYER_NAMESPACE = '5b0c2f7e-3c1a-4d8e-9f60-7a2e1d4b8c93';

/**
 * The wallet's agent id: the name-based UUID (version 5) of the lower-cased address that the
 * service gives an x402 payer without `X-Agent-Id`, so one wallet is one agent (one reputation)
 * whether it buys through svc-mcp or a stock x402 client.
 */
export function agentIdFor(address: string): string {
  const ns = Buffer.from(X402_PAYER_NAMESPACE.replace(/-/g, ''), 'hex');
  const b = createHash('sha1').update(ns).update(address.toLowerCase(), 'utf8').digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const usdc = (units: bigint) => `${formatBaseUnits(units)} USDC`;

function nextUtcMidnight(now: Date): string {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1)).toISOString();
}

/** The error body every tool answers with: the service's reason codes, or the wallet's own. */
function errorBody(err: unknown): Record<string, unknown> {
  if (err instanceof Refusal) return { reason_codes: [err.code], error_human: err.human, ...err.details };
  if (err instanceof SvcApiError) {
    return { reason_codes: err.reasonCodes.length ? err.reasonCodes : [`HTTP_${err.status}`], error_human: err.errorHuman, http_status: err.status };
  }
  if (err instanceof ReceiptVerificationError) return { reason_codes: [err.reason], error_human: err.message, valid: false };
  if (err instanceof SvcConnectionError) return { reason_codes: ['MERCHANT_UNREACHABLE'], error_human: `The merchant could not be reached: ${err.message}` };
  if (err instanceof DiscoveryError) return { reason_codes: ['MANIFEST_INVALID'], error_human: err.message };
  if (err instanceof PaymentRequirementError) return { reason_codes: ['PAYMENT_REQUIREMENT_INVALID'], error_human: err.message };
  if (err instanceof LedgerError) return { reason_codes: ['SPENDING_FILE_UNAVAILABLE'], error_human: `${err.message}. Nothing was signed.` };
  if (err instanceof TypeError && /invalid url/i.test(err.message)) {
    return { reason_codes: ['INPUT_INVALID'], error_human: 'merchant must be a URL or host name of a svc-checkout merchant (https://shop.example.com, https://host/m/<id or slug>)' };
  }
  return { reason_codes: ['INTERNAL_ERROR'], error_human: err instanceof Error ? err.message : String(err) };
}

const MerchantArg = z
  .string()
  .min(1)
  .max(2048)
  .describe('The merchant: its URL or host (https://shop.example.com, https://<service>/m/<merchant id or slug>), or its manifest URL.');

/**
 * The buyer's MCP server: six tools over one wallet (`config.privateKey`) and its limits. Every
 * tool answers JSON (in `content[0].text` and `structuredContent`); a refusal or a failure has
 * `isError: true` and `{reason_codes, error_human}`.
 */
export function createBuyerServer(config: BuyerConfig, options: BuyerServerOptions): McpServer {
  const { redact } = options;
  const now = options.now ?? (() => new Date());
  const account = privateKeyToAccount(config.privateKey);
  const agent = new AgentClient({ account, agentId: config.agentId ?? agentIdFor(account.address), timeoutMs: options.timeoutMs });
  const ledger = new SpendingLedger(config.spendingFile, now);

  const respond = (body: Record<string, unknown>, isError = false): CallToolResult => {
    const text = redact(JSON.stringify(body));
    return { content: [{ type: 'text', text }], structuredContent: JSON.parse(text) as Record<string, unknown>, isError };
  };
  const tool =
    <A>(fn: (args: A) => Promise<Record<string, unknown> | CallToolResult>) =>
    async (args: A): Promise<CallToolResult> => {
      try {
        const out = await fn(args);
        return 'content' in out && Array.isArray(out.content) ? (out as CallToolResult) : respond(out as Record<string, unknown>);
      } catch (err) {
        return respond(errorBody(err), true);
      }
    };

  const discover = (merchant: string) => agent.discover(merchant);

  /**
   * The names an allowlist entry can match. The host the manifest was read from always (TLS
   * vouches for it). The merchant id, the `/m/<ref>` of the URL and the verified domain only when
   * that host is one of the svc-checkout deployments configured (SVC_MCP_SERVICE_URL): any other
   * server can serve a manifest that claims an allowed merchant's id, with its own pay-to address.
   */
  const merchantNames = (handle: MerchantHandle): Set<string> => {
    const url = new URL(handle.manifestUrl);
    const names = new Set([url.hostname.toLowerCase()]);
    if (!config.serviceHosts.includes(url.host.toLowerCase())) return names;
    names.add(handle.merchantId.toLowerCase());
    const ref = /^\/m\/([^/]+)\//.exec(url.pathname)?.[1];
    if (ref) names.add(decodeURIComponent(ref).toLowerCase());
    if (handle.manifest.merchant.domain_verified) names.add(handle.manifest.merchant.domain.toLowerCase());
    return names;
  };
  const isAllowed = (handle: MerchantHandle) => {
    if (!config.allowedMerchants) return true;
    const names = merchantNames(handle);
    return config.allowedMerchants.some((entry) => names.has(entry));
  };
  const assertAllowed = (handle: MerchantHandle) => {
    if (!isAllowed(handle)) {
      throw new Refusal(
        'MERCHANT_NOT_ALLOWED',
        `Refused: merchant ${handle.merchantId} (${handle.manifest.merchant.name}) is not in this wallet's allowed merchants (SVC_MCP_ALLOWED_MERCHANTS; ids and slugs count only on the hosts of SVC_MCP_SERVICE_URL, domains only on their own host). Nothing was signed.`,
        { merchant_id: handle.merchantId },
      );
    }
  };
  const assertChain = (chain: string | null | undefined) => {
    if (!chain || !(config.allowedChains as string[]).includes(chain)) {
      throw new Refusal(
        'CHAIN_NOT_ALLOWED',
        `Refused: the merchant is paid on ${chain ?? 'no x402 chain'}, which this wallet does not allow (allowed: ${config.allowedChains.join(', ')}; SVC_MCP_ALLOWED_CHAINS). Nothing was signed.`,
        { chain: chain ?? null, allowed_chains: config.allowedChains },
      );
    }
  };

  /** The payment requirement this wallet will sign: x402 USDC on an allowed chain, matching the chain registry. */
  const checkRequirement = (pr: PaymentRequired, livemode: boolean): bigint => {
    if (pr.rail !== 'x402') throw new Refusal('RAIL_UNSUPPORTED', `Refused: the session is on the ${pr.rail} rail; this wallet pays with x402 USDC only. Nothing was signed.`);
    assertChain(pr.chain);
    const registry = CHAINS[pr.chain!];
    if (pr.chainId !== registry.chainId || pr.verifyingContract?.toLowerCase() !== registry.usdc.toLowerCase() || pr.asset !== 'USDC' || registry.livemode !== livemode) {
      throw new Refusal(
        'PAYMENT_REQUIREMENT_INVALID',
        `Refused: the payment requirement does not match ${pr.chain} USDC (chain id ${registry.chainId}, token ${registry.usdc}, ${registry.livemode ? 'live' : 'test'} mode). Nothing was signed.`,
      );
    }
    if (!pr.amountBaseUnits || !/^\d{1,30}$/.test(pr.amountBaseUnits)) throw new Refusal('PAYMENT_REQUIREMENT_INVALID', 'Refused: the payment requirement has no integer amount. Nothing was signed.');
    return BigInt(pr.amountBaseUnits);
  };

  const totalsBody = (t: DayTotals) => ({
    day_utc: t.day,
    spent_today: formatBaseUnits(t.spent),
    pending_today: formatBaseUnits(t.pending),
    remaining_today: formatBaseUnits(t.used >= config.maxPerDay ? 0n : config.maxPerDay - t.used),
    max_per_day: formatBaseUnits(config.maxPerDay),
    max_per_payment: formatBaseUnits(config.maxPerPayment),
    currency: 'USDC',
  });

  /** Turns a settle outcome into the tool's answer and the ledger's record of it. */
  const record = async (handle: MerchantHandle, key: string, amount: bigint, chain: string, outcome: SettleOutcome): Promise<CallToolResult | Record<string, unknown>> => {
    const base = { session_id: outcome.session_id, merchant_id: handle.merchantId, amount: formatBaseUnits(amount), currency: 'USDC', chain };
    switch (outcome.status) {
      case 'accepted': {
        await ledger.settle(key, 'spent');
        let verified: Record<string, unknown>;
        try {
          const claims = await handle.verifyReceipt(outcome.receipt);
          verified = { receipt_verified: true, receipt_claims: claims };
        } catch (err) {
          verified = { receipt_verified: false, receipt_error: errorBody(err) };
        }
        return {
          status: 'accepted',
          ...base,
          order_id: outcome.order_id,
          receipt: outcome.receipt,
          reference: outcome.fulfillment.reference,
          rail: outcome.fulfillment.rail,
          ...verified,
        };
      }
      case 'hold':
        await ledger.settle(key, 'pending');
        return {
          status: 'hold',
          ...base,
          review_url: outcome.review_url,
          reason_codes: outcome.reason_codes,
          error_human: outcome.error_human,
          next: `The merchant reviews this order (up to 24 hours). Call get_order_status with this merchant and session_id "${outcome.session_id}" later to learn the result; the amount stays counted against today's limit until then.`,
        };
      case 'settlement_pending':
        await ledger.settle(key, 'pending');
        return {
          status: 'settlement_pending',
          ...base,
          reason_codes: outcome.reason_codes,
          error_human: outcome.error_human,
          next: `The transfer is on its way to the chain. Call get_order_status with this merchant and session_id "${outcome.session_id}" in about 10 seconds.`,
        };
      case 'payment_invalid':
      case 'rejected':
        await ledger.settle(key, 'void');
        return respond(
          {
            status: outcome.status,
            ...base,
            reason_codes: outcome.reason_codes,
            error_human: outcome.error_human,
            next: 'Nothing was charged. The signed authorization expires within 5 minutes and counts against today\'s limit until then.',
          },
          true,
        );
    }
  };

  /** Signs the requirement (already checked and reserved under `key`) and settles it. */
  const signAndSettle = async (handle: MerchantHandle, key: string, sessionId: string, pr: PaymentRequired, amount: bigint) => {
    let body: Awaited<ReturnType<AgentClient['paymentFor']>>;
    try {
      body = await agent.paymentFor(pr);
      if (!('scheme' in body.payment) || body.payment.authorization.value !== amount.toString()) {
        throw new Refusal('PAYMENT_REQUIREMENT_INVALID', 'Refused: the signed amount would differ from the checked one.');
      }
    } catch (err) {
      await ledger.release(key);
      throw err;
    }
    await ledger.signed(key, body.payment.authorization.validBefore);
    try {
      return await record(handle, key, amount, pr.chain!, await handle.settle(sessionId, body));
    } catch (err) {
      // The service answered a refusal: the authorization was not used. Anything else (no answer,
      // 5xx): the payment may have gone through, so it stays counted until get_order_status says.
      const refused = err instanceof SvcApiError && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429;
      await ledger.settle(key, refused ? 'void' : 'pending');
      if (refused) throw err;
      return respond(
        {
          status: 'unknown',
          session_id: sessionId,
          merchant_id: handle.merchantId,
          ...errorBody(err),
          next: `The payment was sent and no answer came back. Call get_order_status with this merchant and session_id "${sessionId}" to learn whether it settled; it counts against today's limit until then.`,
        },
        true,
      );
    }
  };

  const server = new McpServer(
    { name: SERVER_NAME, version: SERVER_VERSION },
    {
      instructions:
        'A USDC wallet for buying from svc-checkout merchants. Typical flow: discover_merchant(url) -> list_products(merchant) -> buy(merchant, items) -> the order, its signed receipt and the payment reference. spending() tells what is left today. Purchases over the per-payment or per-day limit, to merchants or chains not allowed, are refused before anything is signed.',
    },
  );

  server.registerTool(
    'discover_merchant',
    {
      title: 'Discover a merchant',
      description:
        'Reads a merchant\'s svc-checkout manifest: its id, name, domain, test or live mode, how it is paid (chain, address), its mandate and policy summary, and whether this wallet may buy from it. Free; nothing is signed.',
      inputSchema: { url: MerchantArg },
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    tool(async ({ url }: { url: string }) => {
      const handle = await discover(url);
      const m = handle.manifest;
      const chain = m.pay_to.x402?.chain ?? null;
      const allowed = isAllowed(handle);
      const chainAllowed = chain !== null && (config.allowedChains as string[]).includes(chain);
      return {
        merchant: m.merchant,
        merchant_id: handle.merchantId,
        manifest_url: handle.manifestUrl,
        livemode: m.livemode,
        rails: m.rails,
        chain,
        pay_to: m.pay_to.x402 ?? null,
        mandate: m.mandate,
        policy_summary: m.policy_summary,
        allowed_merchant: allowed,
        allowed_chain: chainAllowed,
        can_buy: allowed && chainAllowed && m.rails.includes('x402'),
      };
    }),
  );

  server.registerTool(
    'list_products',
    {
      title: 'List a merchant\'s products',
      description: 'The products a merchant sells now: sku, name, price (exact decimal string, USD), description and category. Free; nothing is signed. Buy with buy(merchant, [{sku, qty}]).',
      inputSchema: { merchant: MerchantArg, category: z.string().max(200).optional().describe('Only products in this category.') },
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    tool(async ({ merchant, category }: { merchant: string; category?: string | undefined }) => {
      const handle = await discover(merchant);
      const items = (await handle.catalog()).filter((i) => i.available && (category === undefined || i.category === category));
      return {
        merchant_id: handle.merchantId,
        livemode: handle.manifest.livemode,
        chain: handle.manifest.pay_to.x402?.chain ?? null,
        products: items.map((i) => ({ sku: i.sku, name: i.name, price: i.price, description: i.description ?? null, category: i.category ?? null, unit: i.unit ?? null })),
      };
    }),
  );

  server.registerTool(
    'buy',
    {
      title: 'Buy from a merchant',
      description:
        'Buys items from a merchant and pays in USDC from this wallet: opens a checkout, checks the total against the per-payment and per-day limits and the allowed merchants and chains, signs an EIP-3009 transfer authorization for exactly the total, and settles. Returns the order id, the signed receipt (verified) and the payment reference; or a hold / pending status with what to call next; or a refusal saying which limit and by how much (then nothing is signed). Costs the order total.',
      inputSchema: {
        merchant: MerchantArg,
        items: CreateCheckoutBody.shape.items.describe('The cart: [{sku, qty}], each SKU once (skus from list_products).'),
        mandate: MandateInput.optional().describe('A mandate from the buyer\'s principal, when the merchant requires one (see discover_merchant\'s mandate and policy_summary).'),
        buyer_intent: CreateCheckoutBody.shape.buyer_intent.describe('What the buyer asked for, in their words (optional, checked against a mandate\'s intent).'),
        buyer: Buyer.optional().describe('Name and shipping address, for physical goods.'),
      },
      annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: true },
    },
    tool(async (args: { merchant: string; items: Array<{ sku: string; qty: number }>; mandate?: MandateInput | undefined; buyer_intent?: string | undefined; buyer?: z.infer<typeof Buyer> | undefined }) => {
      const handle = await discover(args.merchant);
      assertAllowed(handle);
      if (!handle.manifest.rails.includes('x402') || !handle.manifest.pay_to.x402) {
        throw new Refusal('RAIL_UNSUPPORTED', `Refused: merchant ${handle.merchantId} does not take x402 USDC payments. Nothing was signed.`);
      }
      assertChain(handle.manifest.pay_to.x402.chain);

      const session = await handle.checkout(args.items, {
        rail: 'x402',
        ...(args.mandate ? { mandate: args.mandate } : {}),
        ...(args.buyer_intent ? { buyer_intent: args.buyer_intent } : {}),
        ...(args.buyer ? { buyer: args.buyer } : {}),
      });
      const pr = session.payment_required;
      const amount = checkRequirement(pr, session.livemode);
      if (amount > config.maxPerPayment) {
        throw new Refusal(
          'LIMIT_PER_PAYMENT_EXCEEDED',
          `Refused: the total ${usdc(amount)} is over the per-payment limit of ${usdc(config.maxPerPayment)} by ${usdc(amount - config.maxPerPayment)}. Nothing was signed.`,
          { amount: formatBaseUnits(amount), limit: formatBaseUnits(config.maxPerPayment), over_by: formatBaseUnits(amount - config.maxPerPayment), session_id: session.session_id },
        );
      }
      const key = `${handle.merchantId}/${session.session_id}`;
      const reserved = await ledger.reserve(key, { amount, merchant_id: handle.merchantId, session_id: session.session_id }, config.maxPerDay);
      if (!reserved.ok) {
        const t = reserved.totals;
        const left = t.used >= config.maxPerDay ? 0n : config.maxPerDay - t.used;
        const over = t.used + amount - config.maxPerDay;
        throw new Refusal(
          'LIMIT_PER_DAY_EXCEEDED',
          `Refused: the total ${usdc(amount)} is over today's limit (UTC ${t.day}) by ${usdc(over)}: ${usdc(t.used)} of ${usdc(config.maxPerDay)} is already spent or pending, ${usdc(left)} left. Nothing was signed. The limit resets at ${nextUtcMidnight(now())}.`,
          { amount: formatBaseUnits(amount), limit: formatBaseUnits(config.maxPerDay), over_by: formatBaseUnits(over), ...totalsBody(t), session_id: session.session_id },
        );
      }
      return signAndSettle(handle, key, session.session_id, pr, amount);
    }),
  );

  server.registerTool(
    'get_order_status',
    {
      title: 'Get an order\'s status',
      description:
        'The state of a purchase by its session_id (from buy): accepted (with order id, receipt and reference), held for the merchant\'s review, settling, rejected or expired, and what to do next. When the merchant approved a held order after its authorization expired, this signs a fresh authorization for the same amount (already counted) and settles it.',
      inputSchema: { merchant: MerchantArg, session_id: z.string().min(1).max(100).describe('The session_id buy returned.') },
      annotations: { openWorldHint: true },
    },
    tool(async ({ merchant, session_id }: { merchant: string; session_id: string }) => {
      const handle = await discover(merchant);
      const view = await handle.session(session_id);
      const key = `${handle.merchantId}/${view.id}`;
      const entry = await ledger.entry(key);
      const base = { session_id: view.id, merchant_id: handle.merchantId, state: view.state, livemode: view.livemode, total: view.total };
      if (view.state === 'accepted') {
        if (entry) await ledger.settle(key, 'spent');
        return { ...base, status: 'accepted', order_id: view.orderId, receipt: view.receipt, reference: view.settlement?.reference ?? null, rail: view.settlement?.rail ?? null };
      }
      if (view.state === 'rejected' || view.state === 'expired' || (view.state === 'awaiting_payment' && view.paymentError) || (view.state === 'approved' && view.paymentError)) {
        if (entry) await ledger.settle(key, 'void');
        const codes = view.paymentError?.reasonCodes ?? view.verdict?.reasonCodes ?? [];
        return respond({ ...base, status: view.state === 'expired' ? 'expired' : 'rejected', reason_codes: codes.length ? codes : [view.state === 'expired' ? 'SESSION_EXPIRED' : 'REJECTED'], error_human: view.paymentError?.errorHuman ?? 'The order was not completed; nothing was charged.', next: 'Nothing was charged for this session. Buy again if still wanted.' }, true);
      }
      if (view.state === 'approved') {
        if (!entry) return { ...base, status: 'approved', next: 'The merchant approved this order, but this wallet has no record of paying for it; buy again if still wanted.' };
        assertAllowed(handle);
        if (!view.paymentRequired) throw new Refusal('PAYMENT_REQUIREMENT_INVALID', 'The approved session carries no payment requirement.');
        const amount = checkRequirement(view.paymentRequired, view.livemode);
        if (amount.toString() !== entry.amount) {
          throw new Refusal('PAYMENT_REQUIREMENT_INVALID', `Refused: the approved session asks ${usdc(amount)}, not the ${usdc(BigInt(entry.amount))} reserved for it. Nothing was signed.`);
        }
        await ledger.settle(key, 'pending');
        return signAndSettle(handle, key, view.id, view.paymentRequired, amount);
      }
      if (view.state === 'held' || view.state === 'settling') {
        if (entry) await ledger.settle(key, 'pending');
        return {
          ...base,
          status: view.state,
          review_expires_at: view.reviewExpiresAt ?? null,
          next: view.state === 'held' ? 'Still under the merchant\'s review; call get_order_status again later (the review lasts up to 24 hours).' : 'The transfer is settling; call get_order_status again in about 10 seconds.',
        };
      }
      return { ...base, status: 'awaiting_payment', next: 'Not paid. Use buy to purchase (it opens a new checkout).' };
    }),
  );

  server.registerTool(
    'verify_receipt',
    {
      title: 'Verify a receipt',
      description: 'Checks that a receipt (the compact JWS buy returned) is signed by the merchant\'s receipt key and names that merchant; returns its claims (order, amount, chain, reference). Free; nothing is signed.',
      inputSchema: { merchant: MerchantArg, receipt: z.string().min(1).max(20_000).describe('The receipt JWS.') },
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    tool(async ({ merchant, receipt }: { merchant: string; receipt: string }) => {
      const handle = await discover(merchant);
      return { valid: true, merchant_id: handle.merchantId, claims: await handle.verifyReceipt(receipt) };
    }),
  );

  server.registerTool(
    'spending',
    {
      title: 'Spending today',
      description: 'What this wallet may still spend today (UTC day): the per-payment and per-day limits, what is spent and pending today and what is left, the allowed merchants and chains, and the wallet address. Free.',
      inputSchema: {},
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    tool(async () => ({
      ...totalsBody(await ledger.totals()),
      resets_at: nextUtcMidnight(now()),
      wallet_address: account.address,
      agent_id: agent.agentId,
      allowed_merchants: config.allowedMerchants ?? 'any',
      allowed_chains: config.allowedChains,
    })),
  );

  return server;
}
