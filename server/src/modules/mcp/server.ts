import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { MCP_X402_PAYMENT_META } from '@svc/contract';
import { Router, type NextFunction, type Request, type Response } from 'express';
import { agentOriginOf, agentPrefixOf, ctxOf, publicBaseUrl, type Ctx } from '../../http/context.js';
import { bodyGuardMiddleware } from '../../http/body-guard.js';
import { agentCatalog, agentManifest } from '../agent/index.js';
import { paymentTransportOf } from '../x402/index.js';
import { callTool, isToolName, TOOL_LIST, type ToolCall } from './tools.js';

/**
 * The merchant's MCP server over Streamable HTTP, stateless (docs/agent-protocol.md "MCP"):
 * every POST gets its own SDK `Server` and transport (no session id, JSON responses, no
 * server-initiated stream), so any instance answers any request and nothing is kept between
 * calls. Mounted at `/m/<ref>/mcp` and, through agent-host routing, at `/mcp` of the
 * merchant's discovery host and verified domain.
 */

const SERVER_VERSION = '0.1.0';

/** The catalog resource's URI: the agent catalog's absolute URL on the host the agent used. */
const catalogUriOf = (origin: string, prefix: string) => `${origin}${prefix}/agent/catalog`;

function mcpServerFor(ctx: Ctx, call: ToolCall, merchantName: string, catalogUri: string): Server {
  const server = new Server(
    { name: 'svc-checkout', title: `${merchantName} (svc-checkout)`, version: SERVER_VERSION },
    {
      capabilities: { tools: {}, resources: {} },
      instructions:
        `The store of ${merchantName}. list_products shows what it sells; buy pays in USDC over x402 ` +
        '(the first call returns the payment requirement, the paid call returns the order and its signed receipt).',
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOL_LIST }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    const { name, arguments: args, _meta } = request.params;
    if (!isToolName(name)) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}. The tools are ${TOOL_LIST.map((t) => t.name).join(', ')}.`, { reason_codes: ['NOT_FOUND'] });
    }
    const meta = _meta as Record<string, unknown> | undefined;
    const payload = meta && Object.hasOwn(meta, MCP_X402_PAYMENT_META) ? meta[MCP_X402_PAYMENT_META] : undefined;
    return callTool(ctx, { ...call, transport: { ...call.transport, payload } }, name, args);
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [
      {
        uri: catalogUri,
        name: 'catalog',
        title: `${merchantName}: catalog`,
        description: 'Every item this merchant sells (SKU, name, price, description, category), as JSON.',
        mimeType: 'application/json',
      },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    if (request.params.uri !== catalogUri) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown resource: ${request.params.uri}. The catalog is ${catalogUri}.`, { reason_codes: ['NOT_FOUND'] });
    }
    const body = await agentCatalog(ctx, call.ref);
    return { contents: [{ uri: catalogUri, mimeType: 'application/json', text: JSON.stringify(body) }] };
  });
  return server;
}

/** A JSON-RPC error answer outside any request (a method or message this stateless endpoint does not take). */
function jsonRpcError(res: Response, status: number, code: number, message: string, reasonCode: string) {
  res.status(status).json({ jsonrpc: '2.0', error: { code, message, data: { reason_codes: [reasonCode], error_human: message } }, id: null });
}

/** POST: one JSON-RPC message through a fresh server and transport. */
async function handlePost(req: Request, res: Response, next: NextFunction) {
  try {
    const ref = String(req.params.merchant);
    const ctx = ctxOf(req);
    const prefix = agentPrefixOf(req, ref);
    // The published merchant, from the agent read cache: an unknown or unpublished one is 404 before any MCP.
    const manifest = await agentManifest(ctx, ref, prefix);
    if (Array.isArray(req.body)) {
      // A batch would run its calls concurrently on one request's EntityManager: one message per POST.
      return jsonRpcError(res, 400, ErrorCode.InvalidRequest, 'JSON-RPC batches are not accepted: send one message per request.', 'VALIDATION_FAILED');
    }
    const { resourceUrl } = paymentTransportOf(req);
    const call: ToolCall = { ref, prefix, transport: { header: null, resourceUrl, baseUrl: publicBaseUrl(req) } };
    const server = mcpServerFor(ctx, call, manifest.body.merchant.name, catalogUriOf(agentOriginOf(req), prefix));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  } catch (err) {
    next(err);
  }
}

/** GET (a server-sent event stream) and DELETE (ending a session): a stateless server has neither. */
function methodNotAllowed(_req: Request, res: Response) {
  res.setHeader('Allow', 'POST, OPTIONS');
  jsonRpcError(res, 405, ErrorCode.ConnectionClosed, 'This MCP endpoint is stateless: POST one JSON-RPC message per request (no event stream, no session).', 'METHOD_NOT_ALLOWED');
}

/** The MCP endpoint of every published merchant: `/m/<ref>/mcp` (agent-host routing rewrites `/mcp` of its hosts to it). */
export function mcpRouter(): Router {
  const router = Router();
  router.post('/m/:merchant/mcp', bodyGuardMiddleware, handlePost);
  router.get('/m/:merchant/mcp', methodNotAllowed);
  router.delete('/m/:merchant/mcp', methodNotAllowed);
  return router;
}
