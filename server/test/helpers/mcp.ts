import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { PaymentPayload, PaymentRequired } from '@x402/core/types';
import { ExactEvmScheme } from '@x402/evm';
import type { PrivateKeyAccount } from 'viem/accounts';

/**
 * MCP clients for the merchant's MCP endpoint: the official SDK client over Streamable HTTP,
 * and an x402 MCP client written from x402's `specs/transports-v2/mcp.md` (tool-result
 * binding): a PaymentRequired arrives as an `isError` tool result (structuredContent, else
 * content[0].text), the client signs `accepts[0]` and calls the tool again with the
 * PaymentPayload in `params._meta["x402/payment"]`; the settled result carries
 * `_meta["x402/payment-response"]`.
 */

/** The official MCP client, connected (initialize) to `url`. */
export async function mcpClient(url: string): Promise<Client> {
  const client = new Client({ name: 'svc-test-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** The PaymentRequired a refused or unpaid `buy` answers: x402's, with our reason codes (and the session once one exists). */
export type McpPaymentRequired = PaymentRequired & { reason_codes: string[]; error_human: string; session_id?: string };

const isPaymentRequired = (v: unknown): v is McpPaymentRequired =>
  typeof v === 'object' && v !== null && 'x402Version' in v && 'accepts' in v && Array.isArray((v as { accepts: unknown }).accepts);

/** The spec's client rule: structuredContent if it holds x402Version and accepts, else content[0].text parsed. */
export function paymentRequiredOf(result: CallToolResult): McpPaymentRequired | null {
  if (!result.isError) return null;
  if (isPaymentRequired(result.structuredContent)) return result.structuredContent;
  const first = result.content[0];
  if (first?.type !== 'text') return null;
  try {
    const parsed: unknown = JSON.parse(first.text);
    return isPaymentRequired(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

/** A PaymentPayload for `accepts[0]` of `pr`, signed by `account` with @x402/evm's exact scheme (EIP-3009). */
export async function signAccepts(account: PrivateKeyAccount, pr: PaymentRequired, extensions?: Record<string, unknown>): Promise<PaymentPayload> {
  const accepted = pr.accepts[0]!;
  const { payload } = await new ExactEvmScheme(account).createPaymentPayload(2, accepted);
  return { x402Version: 2, resource: pr.resource, accepted, payload, ...(extensions ? { extensions } : {}) };
}

/** The structured result of a tool call (the SDK types it loosely). */
export const structured = (r: CallToolResult) => r.structuredContent as Record<string, any>;

/** `tools/call` with an x402 payment in `_meta` (or none). */
export async function callWithPayment(client: Client, name: string, args: Record<string, unknown>, payment?: unknown): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args, ...(payment !== undefined ? { _meta: { 'x402/payment': payment } } : {}) })) as CallToolResult;
}

/**
 * The x402 MCP client: calls a paid tool, and on a PaymentRequired signs it and calls again
 * (once). Returns the first answer, the payment sent and the final answer.
 */
export async function callPaidTool(
  client: Client,
  account: PrivateKeyAccount,
  name: string,
  args: Record<string, unknown>,
  opts: { sign?: (pr: PaymentRequired) => Promise<PaymentPayload> } = {},
): Promise<{ required: McpPaymentRequired; payment: PaymentPayload; result: CallToolResult }> {
  const first = await callWithPayment(client, name, args);
  const required = paymentRequiredOf(first);
  if (!required) throw new Error(`no PaymentRequired from ${name}: ${JSON.stringify(first)}`);
  const payment = await (opts.sign ?? ((pr) => signAccepts(account, pr)))(required);
  const result = await callWithPayment(client, name, args, payment);
  return { required, payment, result };
}

/** One raw JSON-RPC POST to an MCP endpoint (what a client without the SDK sends), answered as text and JSON. */
export async function rawMcp(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** A tool result of the buyer's server as the tests read it. */
export type BuyerResult = { isError?: boolean; structuredContent?: any; content: Array<{ type: string; text?: string }> };
/** The buyer's MCP server (`svc-mcp`), launched over stdio, and the official client driving it. */
export type SvcMcp = { client: Client; call(name: string, args?: Record<string, unknown>): Promise<BuyerResult>; stderr(): string; close(): Promise<void> };

/**
 * The built `svc-mcp` bin (mcp/dist/bin.js, what `npx svc-mcp` runs) spawned as an agent host
 * does, with only `env` (plus PATH) in its environment, connected with the official MCP client.
 * Every tool result and, on close, everything it printed on stderr go to `transcript`.
 */
export async function launchSvcMcp(bin: string, env: Record<string, string>, transcript: string[]): Promise<SvcMcp> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [bin], env: { PATH: process.env.PATH ?? '', ...env }, stderr: 'pipe' });
  let stderr = '';
  transport.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const client = new Client({ name: 'svc-test-host', version: '1.0.0' });
  await client.connect(transport);
  return {
    client,
    async call(name, args = {}) {
      const r = (await client.callTool({ name, arguments: args })) as BuyerResult;
      transcript.push(JSON.stringify(r));
      return r;
    },
    stderr: () => stderr,
    async close() {
      await client.close();
      transcript.push(stderr);
    },
  };
}
