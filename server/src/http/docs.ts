import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Router, type Request, type Response } from 'express';
import { sendCode } from './errors.js';

/** openapi/openapi.json at the repository root (written by scripts/emit-openapi.ts). */
export const DEFAULT_OPENAPI_PATH = fileURLToPath(new URL('../../../openapi/openapi.json', import.meta.url));

/** Redoc's self-contained browser bundle, served from node_modules: the docs page loads nothing from a CDN. */
function redocBundlePath(): string {
  return createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js');
}

const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>svc-checkout API reference</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<div id="redoc"></div>
<script src="/docs/assets/redoc.standalone.js"></script>
<script src="/docs/assets/init.js"></script>
</body>
</html>
`;

const INIT_JS = `Redoc.init('/openapi.json', {
  hideDownloadButton: false,
  expandResponses: '200,201',
  pathInMiddlePanel: true,
  theme: { typography: { fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif', headings: { fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif' } } }
}, document.getElementById('redoc'));
`;

/**
 * Same-origin only: the page's own scripts, Redoc's inline styles and its search worker (a
 * blob). `img-src` excludes remote hosts, so the bundle's one remote image (a logo) never loads.
 */
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  'worker-src blob:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export type DocsOptions = { openapiPath?: string };

/**
 * `GET /openapi.json` (the document read once at start) and `GET /docs` (Redoc, served
 * locally). Plain Express routes: public, outside the contract, so no auth middleware runs.
 */
export function docsRouter(opts: DocsOptions = {}): Router {
  const path = opts.openapiPath ?? DEFAULT_OPENAPI_PATH;
  const spec = existsSync(path) ? readFileSync(path) : null;
  const bundle = readFileSync(redocBundlePath());
  const router = Router();

  router.get('/openapi.json', (_req: Request, res: Response) => {
    if (!spec) return sendCode(res, 'NOT_FOUND', 'The OpenAPI document has not been generated; run npm run openapi.');
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Cache-Control', 'public, max-age=300');
    res.status(200).send(spec);
  });

  router.get('/docs', (_req: Request, res: Response) => {
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.setHeader('Content-Security-Policy', DOCS_CSP);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'no-cache');
    res.status(200).send(DOCS_HTML);
  });

  router.get('/docs/assets/redoc.standalone.js', (_req: Request, res: Response) => {
    res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'public, max-age=86400');
    res.status(200).send(bundle);
  });

  router.get('/docs/assets/init.js', (_req: Request, res: Response) => {
    res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'no-cache');
    res.status(200).send(INIT_JS);
  });

  return router;
}
