import { toJsonSchemaCompat } from '@modelcontextprotocol/sdk/server/zod-json-schema-compat.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import {
  MCP_TOOLS,
  MCP_X402_PAYMENT_RESPONSE_META,
  type McpToolName,
  type SessionView,
} from '@svc/contract';
import type { z } from 'zod';
import type { Ctx } from '../../http/context.js';
import { describeIssue, isDatabaseUnavailable } from '../../http/errors.js';
import { ApiError } from '../../lib/errors.js';
import { agentCatalog, agentManifest, currentMerchant, openCheckout, pollCheckout, settleMerchant } from '../agent/index.js';
import { listCatalogItems, presentCatalogItem } from '../catalog/index.js';
import { buyItems, settleAnyTransport, type PurchaseReply, type SettleReply, type X402Transport } from '../x402/index.js';

/**
 * The merchant's MCP tools: each one calls the same service function as its agent HTTP route
 * (modules/agent, modules/x402), so MCP is one more transport of the one protocol. Inputs and
 * outputs are the contract's schemas (`MCP_TOOLS`, contract/src/mcp.ts), published as JSON
 * Schema; arguments are parsed with them here, and any refusal is a tool error carrying
 * `reason_codes` and `error_human` like the HTTP body.
 */

/** Where the tool call came from: the merchant reference and prefix of the endpoint, and the x402 transport (payment from `_meta`). */
export type ToolCall = { ref: string; prefix: string; transport: X402Transport };

/** Seconds an agent waits before polling a deferred purchase: a settlement reaches the chain in seconds, a review takes a person. */
const POLL_PENDING_SECONDS = 5;
const POLL_HOLD_SECONDS = 60;
/** What an unpaid `buy` tells the agent (the HTTP 402 names its headers instead). */
const UNPAID_HUMAN = 'Payment required: sign accepts[0] (x402 exact scheme, EIP-3009) and call buy again with the PaymentPayload in _meta["x402/payment"].';

const DESCRIPTIONS: Record<McpToolName, string> = {
  get_merchant:
    "The merchant's discovery manifest: who it is, test or live mode, the payment rails and payee address, the mandate and policy limits. Free.",
  list_products:
    'The catalog: each item with its SKU, name, price (exact decimal USD string), description and category. Filter by `category`; `available: false` lists retired items instead. Free.',
  create_checkout:
    'Open a checkout session for a cart (`agent_id` UUID, `items` of {sku, qty}; optional mandate and buyer) without paying: returns the session id, the total and the exact payment requirement. Free; pay it with `buy` and `session_id`.',
  get_checkout:
    'The state of a checkout session (awaiting_payment, settling, accepted, held, rejected, expired), with the order id and receipt once paid and `next` when there is something to do. Free; use it to poll a held or pending purchase.',
  buy:
    'Buy `items` (or pay an open `session_id`) in USDC over x402. Called without payment it returns the x402 PaymentRequired (isError, the exact amount, asset, network and payee): sign accepts[0] and call again with the PaymentPayload in `_meta["x402/payment"]`. Paid, it returns the order id, the signed receipt (JWS) and the transaction reference; a held or pending purchase says what to poll and when. Costs the cart total. To pay with a mandate, open the session with create_checkout and pay its session_id.',
};

/** The JSON Schema of a contract schema, as the MCP SDK's own converter writes it (every tool schema is an object). */
function jsonSchemaOf(schema: z.ZodTypeAny): Tool['inputSchema'] {
  const { $schema: _drop, ...json } = toJsonSchemaCompat(schema as never, { pipeStrategy: 'input' });
  return { type: 'object', ...json } as Tool['inputSchema'];
}

/** The tool list (`tools/list`): built once, the schemas do not change at run time. */
export const TOOL_LIST: Tool[] = (Object.keys(MCP_TOOLS) as McpToolName[]).map((name) => ({
  name,
  description: DESCRIPTIONS[name],
  inputSchema: jsonSchemaOf(MCP_TOOLS[name].input),
  outputSchema: jsonSchemaOf(MCP_TOOLS[name].output),
  annotations: { readOnlyHint: name !== 'create_checkout' && name !== 'buy', openWorldHint: name === 'buy', idempotentHint: name !== 'create_checkout' },
}));

/** A structured tool result, its JSON in `content[0].text` as well (x402's MCP transport and clients without structured content read it there). */
export function toolResult(structured: Record<string, unknown>, opts: { isError?: boolean; meta?: Record<string, unknown> } = {}): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(structured) }],
    structuredContent: structured,
    ...(opts.isError ? { isError: true } : {}),
    ...(opts.meta ? { _meta: opts.meta } : {}),
  };
}

/**
 * A refusal as a tool error: the HTTP error body (`reason_codes`, `error_human`, and what the
 * code adds) as JSON text. No structuredContent: it would have to match the tool's output
 * schema (clients validate it even on errors); only `buy`'s PaymentRequired is structured.
 */
export const toolError = (body: Record<string, unknown>): CallToolResult => ({ content: [{ type: 'text', text: JSON.stringify(body) }], isError: true });

/** Any error a tool's service call throws, answered as the error middleware would answer it over HTTP. */
export function toolErrorOf(ctx: Ctx, err: unknown): CallToolResult {
  if (err instanceof ApiError) {
    // The Retry-After an HTTP answer would carry in a header (RATE_LIMITED) travels in the body.
    const retryAfter = err.headers['Retry-After'];
    return toolError(retryAfter === undefined ? err.body() : { ...err.body(), retry_after_seconds: Number(retryAfter) });
  }
  if (isDatabaseUnavailable(err)) {
    ctx.log.error({ err: { name: (err as Error).name, message: String((err as Error).message).split('\n')[0] } }, 'database unavailable (mcp)');
    return toolError(new ApiError('DATABASE_UNAVAILABLE').body());
  }
  const safe = err instanceof Error ? { name: err.name, message: err.message.split('\n')[0], stack: err.stack?.split('\n').slice(1, 8).join('\n') } : { value: String(err) };
  ctx.log.error({ err: safe }, 'unhandled error in an MCP tool');
  return toolError(new ApiError('INTERNAL_ERROR').body());
}

/** The x402 answer of `buy` as a tool result (x402 specs/transports-v2/mcp.md, tool-result binding). */
function buyResult(reply: PurchaseReply | SettleReply, sessionId: string | null): CallToolResult {
  const r = reply.response;
  if (r.status === 200) {
    const body = { ...r.body, session_id: 'session_id' in r.body ? r.body.session_id : sessionId! };
    return toolResult(body, reply.x402?.settled ? { meta: { [MCP_X402_PAYMENT_RESPONSE_META]: reply.x402.settled } } : {});
  }
  if (r.status === 202) {
    const body = r.body as { status: 'hold' | 'settlement_pending'; session_id?: string };
    const id = body.session_id ?? sessionId!;
    const after = body.status === 'hold' ? POLL_HOLD_SECONDS : POLL_PENDING_SECONDS;
    return toolResult({ ...r.body, session_id: id, poll: { tool: 'get_checkout', arguments: { session_id: id }, after_seconds: after } });
  }
  if (r.status === 402 && reply.x402?.required) {
    // The x402 PaymentRequired as is, with our reason codes beside it (and the session once one exists).
    const b = r.body as { reason_codes: string[]; error_human: string; session_id?: string };
    const unpaid = b.reason_codes.length === 1 && b.reason_codes[0] === 'PAYMENT_REQUIRED';
    const human = unpaid ? UNPAID_HUMAN : b.error_human;
    const required = { ...reply.x402.required, reason_codes: b.reason_codes, error_human: human, ...(b.session_id ? { session_id: b.session_id } : {}) };
    return toolResult(required, { isError: true });
  }
  return toolError(r.body as Record<string, unknown>);
}

type Args<N extends McpToolName> = z.infer<(typeof MCP_TOOLS)[N]['input']>;

const run: { [N in McpToolName]: (ctx: Ctx, call: ToolCall, args: Args<N>) => Promise<CallToolResult> } = {
  get_merchant: async (ctx, call) => toolResult((await agentManifest(ctx, call.ref, call.prefix)).body),
  list_products: async (ctx, call, args) => {
    const items =
      args.available === false
        ? (await listCatalogItems(ctx.em, (await currentMerchant(ctx, call.ref)).id, false)).map(presentCatalogItem)
        : (await agentCatalog(ctx, call.ref)).items;
    return toolResult({ items: args.category === undefined ? items : items.filter((i) => i.category === args.category) });
  },
  create_checkout: async (ctx, call, args) => toolResult(await openCheckout(ctx, call.ref, call.prefix, args)),
  get_checkout: async (ctx, call, args) => toolResult((await pollCheckout(ctx, call.ref, args.session_id)) satisfies SessionView),
  buy: async (ctx, call, args) => {
    if (args.session_id !== undefined) {
      return buyResult(await settleAnyTransport(ctx, settleMerchant(ctx, call.ref), args.session_id, undefined, call.transport), args.session_id);
    }
    const m = await currentMerchant(ctx, call.ref);
    const reply = await buyItems(ctx, m, { ...call.transport, prefix: call.prefix, items: args.items!, ...(args.agent_id ? { agentId: args.agent_id } : {}) });
    return buyResult(reply, null);
  },
};

export const isToolName = (name: string): name is McpToolName => Object.hasOwn(MCP_TOOLS, name);

/** `tools/call`: the arguments parsed with the tool's contract schema, then its service call; every refusal is a tool error. */
export async function callTool(ctx: Ctx, call: ToolCall, name: McpToolName, rawArgs: unknown): Promise<CallToolResult> {
  const parsed = MCP_TOOLS[name].input.safeParse(rawArgs ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return toolError({ reason_codes: ['VALIDATION_FAILED'], error_human: issue ? describeIssue('arguments', issue) : 'The arguments failed validation.' });
  }
  try {
    return await (run[name] as (ctx: Ctx, call: ToolCall, args: unknown) => Promise<CallToolResult>)(ctx, call, parsed.data);
  } catch (err) {
    return toolErrorOf(ctx, err);
  }
}
