import type { NextFunction, Request, Response } from 'express';
import { agentRefForHost } from '../modules/agent/service.js';
import { ctxOf } from './context.js';

const AGENT_PATH = /^\/(?:\.well-known\/(?:agentic-checkout|jwks)\.json|agent(?:\/.*)?|x402\/[^/]+)$/;

/**
 * Serves the agent routes at the root of `<slug>.<discovery domain>` and of a merchant's own
 * domain by rewriting the URL to the path form `/m/<ref>/...`; `req.agentPrefix` remembers
 * the prefix the agent actually used so `next` calls and manifest URLs match it.
 */
export function agentHostRouting(discoveryDomain: string) {
  const suffix = `.${discoveryDomain.toLowerCase()}`;
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
      if (host.endsWith(suffix) && host.length > suffix.length) {
        const label = host.slice(0, -suffix.length);
        if (!label.includes('.')) ref = label;
      }
      if (!ref && host) ref = await agentRefForHost(ctxOf(req), host);
      if (!ref) return next();
      req.agentPrefix = '';
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
    }
  }
}
