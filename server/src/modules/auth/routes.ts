import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed, ctxOf, publicBaseUrl } from '../../http/context.js';
import { clearSessionCookie, isSameOrigin, setSessionCookie } from '../../http/session-cookie.js';
import type { Response } from 'express';
import { foreignFormPage } from './pages.js';
import { approveDevice, describeKey, endSession, openSignInLink, pollDeviceSignIn, startDeviceSignIn, startEmailSignIn, verifySignIn } from './service.js';

const s = initServer();

/** GET /v1/me: the calling key (or signed-in member), its project and mode. */
export const meRoutes = s.router(contract.me, {
  get: async ({ req }) => {
    const ctx = authed(req);
    return { status: 200, body: await describeKey(ctx.em, ctx.auth) };
  },
});

/** /v1/auth: magic link, browser sessions and the CLI's device-code flow (decisions.md "Sign-in and keys"). */
export const authRoutes = s.router(contract.auth, {
  emailStart: async ({ req, body }) => ({ status: 200, body: await startEmailSignIn(ctxOf(req), body, req.ip ?? 'unknown', publicBaseUrl(req)) }),
  verify: async ({ req, res, query }) => {
    const out = await openSignInLink(ctxOf(req), query.token);
    linkPageHeaders(res);
    return { status: out.status, body: out.html };
  },
  verifyConfirm: async ({ req, res, body }) => {
    const ctx = ctxOf(req);
    linkPageHeaders(res);
    // Login CSRF: another site must not post a token of its own and sign the visitor into its account.
    if (!isSameOrigin(req, ctx.services.config)) return { status: 403, body: foreignFormPage() };
    const out = await verifySignIn(ctx, body.token);
    if (out.status === 410) return { status: 410, body: out.html };
    setSessionCookie(res, ctx.services.config, out.sessionToken, out.maxAgeSeconds);
    res.setHeader('Location', out.location);
    return { status: 303, body: undefined };
  },
  logout: async ({ req, res }) => {
    const ctx = authed(req);
    await endSession(ctx);
    clearSessionCookie(res, ctx.services.config);
    return { status: 200, body: { ok: true } };
  },
  cliStart: async ({ req }) => ({ status: 200, body: await startDeviceSignIn(ctxOf(req), req.ip ?? 'unknown', publicBaseUrl(req)) }),
  cliPoll: async ({ req, body }) => ({ status: 200, body: await pollDeviceSignIn(ctxOf(req), body.device_code) }),
  cliApprove: async ({ req, body }) => {
    await approveDevice(authed(req), body.user_code);
    return { status: 200, body: { ok: true } };
  },
  // the device page is the dashboard's; this older address leads there, without any code it carried (the person types it)
  device: async ({ res }) => {
    res.setHeader('Location', '/dashboard/device');
    return { status: 303, body: undefined };
  },
});

/**
 * The link's pages carry the token: never cached, never framed (the button must not be
 * clickjacked), and no Referer leaves this origin. Not `no-referrer`: with it a browser sends
 * the form's POST with `Origin: null`, and the same-origin check needs the real one.
 */
function linkPageHeaders(res: Response) {
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Referrer-Policy', 'same-origin');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
}
