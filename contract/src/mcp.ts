import { z } from 'zod';
import { CheckoutCreated, CreateCheckoutBody, Manifest, SessionView } from './agent.js';
import { CatalogItem } from './catalog.js';
import { X402Deferred, X402PaymentRequiredV2, X402Purchase } from './x402.js';

/**
 * The merchant's MCP server (`<prefix>/mcp`, docs/agent-protocol.md "MCP"): each tool's input
 * and output, composed from the agent protocol's schemas so a tool and its HTTP route cannot
 * drift. The server publishes them as the tools' JSON schemas.
 */

/** The MCP `_meta` key of an x402 PaymentPayload sent with `tools/call` (x402 specs/transports-v2/mcp.md). */
export const MCP_X402_PAYMENT_META = 'x402/payment';
/** The MCP result `_meta` key of the x402 SettleResponse of a settled payment. */
export const MCP_X402_PAYMENT_RESPONSE_META = 'x402/payment-response';

const SessionId = z.string().min(1).max(100).describe('The checkout session id (cs_...).');
const Cart = CreateCheckoutBody.shape.items;

export const McpGetMerchantInput = z.object({}).strict();
export const McpListProductsInput = z
  .object({
    category: z.string().min(1).max(200).optional().describe('Only items of this category (exact match).'),
    available: z.boolean().optional().describe('Default true: the items that can be bought. false: the retired items (listed for reference; they cannot be bought).'),
  })
  .strict();
export const McpListProductsOutput = z.object({ items: z.array(CatalogItem) });
export const McpCreateCheckoutInput = CreateCheckoutBody;
export const McpGetCheckoutInput = z.object({ session_id: SessionId }).strict();
export const McpBuyInput = z
  .object({
    items: Cart.optional().describe('Buy these items now (one session is opened for them when the payment arrives). Give items or session_id.'),
    session_id: SessionId.optional().describe('Pay this open checkout session (from create_checkout, e.g. one carrying a mandate). Give items or session_id.'),
    agent_id: CreateCheckoutBody.shape.agent_id.optional().describe('With items: your agent id (UUID); without it, the name-based UUID of the paying address.'),
  })
  .strict()
  .refine((b) => (b.items === undefined) !== (b.session_id === undefined), 'give exactly one of items or session_id');
/**
 * `buy` unpaid, or refused (`isError`): the x402 PaymentRequired to sign (x402's MCP transport
 * puts it in structuredContent), with the reason codes and the session once one exists.
 */
export const McpPaymentRequired = X402PaymentRequiredV2.extend({
  reason_codes: z.array(z.string()).describe('PAYMENT_REQUIRED before any payment; else why the payment was refused (the HTTP codes).'),
  error_human: z.string(),
  session_id: z.string().optional(),
});
/** What `buy` answers: the payment settled (`accepted`), was held for review or is still reaching the chain, or (isError) the PaymentRequired. */
export const McpBuyOutput = z.union([
  X402Purchase,
  X402Deferred.extend({
    poll: z
      .object({ tool: z.literal('get_checkout'), arguments: McpGetCheckoutInput, after_seconds: z.number().int() })
      .describe('Call this tool with these arguments after `after_seconds` to see the outcome; do not pay again.'),
  }),
  McpPaymentRequired,
]);

/** Every other tool error (`isError: true`, its JSON in `content[0].text`): reason codes and one human line, as the HTTP routes answer. */
export const McpToolError = z.object({ reason_codes: z.array(z.string()), error_human: z.string() });

/** The tools by name: input and (success) output schema. */
export const MCP_TOOLS = {
  get_merchant: { input: McpGetMerchantInput, output: Manifest },
  list_products: { input: McpListProductsInput, output: McpListProductsOutput },
  create_checkout: { input: McpCreateCheckoutInput, output: CheckoutCreated },
  get_checkout: { input: McpGetCheckoutInput, output: SessionView },
  buy: { input: McpBuyInput, output: McpBuyOutput },
} as const;
export type McpToolName = keyof typeof MCP_TOOLS;
