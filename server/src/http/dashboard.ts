import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { Router, type Request, type Response } from 'express';
import { dashboardBuilding } from './dashboard-build.js';
import { sendCode } from './errors.js';

/** dashboard/dist at the repository root (built by `npm run build`, or in the background by `npm start` when stale). */
export const DEFAULT_DASHBOARD_DIR = fileURLToPath(new URL('../../../dashboard/dist', import.meta.url));

/**
 * The dashboard's pages load only from this origin; Mantine sets inline styles, so styles allow
 * 'unsafe-inline' (no inline script is allowed). The dashboard cannot be framed.
 */
const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

/** While `npm start` builds the dashboard: a page that reloads itself (a meta refresh; no script). */
const BUILDING_PAGE =
  '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2"><title>svc-checkout</title></head>' +
  '<body style="font-family:sans-serif;margin:3rem">The dashboard is being built (a few seconds on the first start). This page reloads by itself.</body></html>';

/** The site's icon (a teal rounded square with a check mark), served as SVG at /favicon.svg and /favicon.ico (browsers read the type, not the name). */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#0ca678"/>' +
  '<path d="M9 16.5l4.5 4.5L23 11.5" fill="none" stroke="#fff" stroke-width="3.2" stroke-linecap="round" stroke-linejoin="round"/></svg>';

function securityHeaders(res: Response) {
  res.setHeader('Content-Security-Policy', DASHBOARD_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Referrer-Policy', 'same-origin');
}

/**
 * `/dashboard/*`: the merchant dashboard, a single-page app built by Vite. Hashed assets are
 * cached for a year; every other path under /dashboard answers index.html (no-cache), so deep
 * links such as a hold's review_url work on a fresh page load. `/` and `/login` lead to it.
 * The app talks to the public /v1 API with the session cookie; there is no dashboard API.
 */
export function dashboardRouter(dir: string = DEFAULT_DASHBOARD_DIR): Router {
  const router = Router();
  const indexPath = join(dir, 'index.html');
  // Read again whenever the file changes (a build that finished after the server started).
  let index: { mtimeMs: number; body: Buffer } | null = null;
  const currentIndex = (): Buffer | null => {
    const st = statSync(indexPath, { throwIfNoEntry: false });
    if (!st) return null;
    if (!index || index.mtimeMs !== st.mtimeMs) index = { mtimeMs: st.mtimeMs, body: readFileSync(indexPath) };
    return index.body;
  };

  router.get('/', (_req: Request, res: Response) => res.redirect(302, '/dashboard/'));
  router.get('/login', (_req: Request, res: Response) => res.redirect(302, '/dashboard/login'));
  router.get(['/favicon.ico', '/favicon.svg'], (_req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'public, max-age=86400');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.type('image/svg+xml').send(FAVICON_SVG);
  });

  router.use(
    '/dashboard/assets',
    express.static(join(dir, 'assets'), {
      immutable: true,
      maxAge: '365d',
      index: false,
      setHeaders: (res) => res.setHeader('X-Content-Type-Options', 'nosniff'),
    }),
  );
  // a missing asset is a 404, never the app's index.html under a script's URL
  router.use('/dashboard/assets', (_req: Request, res: Response) => sendCode(res, 'NOT_FOUND', 'No such dashboard asset.'));

  router.get('/dashboard{/*page}', (req: Request, res: Response) => {
    // relative asset URLs need the trailing slash (routing is not strict: check the raw path)
    if (req.originalUrl.split('?')[0] === '/dashboard') return res.redirect(301, '/dashboard/');
    securityHeaders(res);
    res.setHeader('Cache-Control', 'no-cache');
    if (dashboardBuilding()) {
      // Vite empties dist/ first: the old page would point at assets that are gone.
      res.setHeader('Retry-After', '2');
      res.status(503).type('html').send(BUILDING_PAGE);
      return;
    }
    const body = currentIndex();
    if (!body) {
      res.status(503).type('text/plain').send('The dashboard has not been built: run `npm run build:dashboard` (npm start builds it when it is missing).');
      return;
    }
    res.status(200).type('html').send(body);
  });
  return router;
}
