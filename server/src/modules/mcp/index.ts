/** The merchant's MCP server (Streamable HTTP, stateless): the agent protocol and x402 `buy` as MCP tools. */
export { mcpRouter } from './server.js';
