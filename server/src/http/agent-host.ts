import type { NextFunction, Request, Response } from 'express';
import type { Config } from '../config.js';
import { ctxOf, type Ctx } from './context.js';

/** The merchant reference (its id) whose verified domain is `host`, or null: the agent module's `agentRefForHost`, passed in by app.ts. */
export type AgentRefForHost = (ctx: Ctx, host: string) => Promise<string | null>;

const AGENT_PATH = /^\/(?:\.well-known\/(?:agentic-checkout|jwks)\.json|agent(?:\/.*)?|x402\/[^/]+|mcp)$/;

/**
 * Serves the agent routes at the root of `<slug>.<discovery domain>` and of a merchant's own
 * domain by rewriting the URL to the path form `/m/<ref>/...`; `req.agentPrefix` remembers
 * the prefix the agent actually used so `next` calls and manifest URLs match it, and
 * `req.agentOrigin` the origin of that host as configuration names it: the scheme and port of
 * SVC_PUBLIC_BASE_URL with the configured discovery domain or the merchant's stored domain,
 * never the Host header's own spelling (its port, its scheme).
 */
export function agentHostRouting(config: Pick<Config, 'SVC_DISCOVERY_DOMAIN' | 'SVC_PUBLIC_BASE_URL'>, agentRefForHost: AgentRefForHost) {
  const discoveryDomain = config.SVC_DISCOVERY_DOMAIN.toLowerCase();
  const suffix = `.${discoveryDomain}`;
  const base = new URL(config.SVC_PUBLIC_BASE_URL);
  const originOf = (hostname: string) => `${base.protocol}//${hostname}${base.port ? `:${base.port}` : ''}`;
  return async (req: Request, _res: Response, next: NextFunction) => {
    try {
      const mPath = /^\/m\/([^/]+)(\/.*)?$/.exec(req.path);
      if (mPath) {
        req.agentPrefix = `/m/${mPath[1]}`;
        return next();
      }
      if (!AGENT_PATH.test(req.path)) return next();
      const host = (req.hostname || '').toLowerCase();
      let ref: string | null = null;
      let origin: string | null = null;
      if (host.endsWith(suffix) && host.length > suffix.length) {
        const label = host.slice(0, -suffix.length);
        // A slug is one DNS label; anything else (a dot, a port or bracket the parser left) names no merchant.
        if (/^[a-z0-9_-]+$/.test(label)) {
          ref = label;
          origin = originOf(`${label}${suffix}`);
        }
      }
      if (!ref && host) {
        ref = await agentRefForHost(ctxOf(req), host);
        // The lookup is equality with a merchant's stored (lower-case) domain: the origin names that stored domain.
        if (ref) origin = originOf(host);
      }
      if (!ref || !origin) return next();
      req.agentPrefix = '';
      req.agentOrigin = origin;
      req.url = `/m/${encodeURIComponent(ref)}${req.url}`;
      next();
    } catch (err) {
      next(err);
    }
  };
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      agentPrefix?: string;
      /** The configured origin of the discovery host or merchant domain the agent used (agentOriginOf). */
      agentOrigin?: string;
    }
  }
}
