import { z } from 'zod';
import { c, meta, publicErrors } from './common.js';
import { ErrorBody } from './errors.js';
import { ApiKeyWithSecret } from './keys.js';

const Email = z.string().trim().max(254).email('must be an email address');
/** Device codes are 43 base64url characters (32 random bytes). */
const DeviceCodeValue = z.string().min(1).max(200);
/** User codes look like WDJB-MJHT (RFC 8628's 8 letters from a 20-letter alphabet); case and the dash are optional. */
const UserCodeValue = z.string().trim().min(8).max(9);

export const EmailStartBody = z
  .object({
    email: Email,
    device_code: DeviceCodeValue.optional().describe(
      'From POST /v1/auth/cli/start (the CLI\'s own): the mailed link then lands on the device page, where the signed-in person types the code their terminal shows. The link approves nothing by itself, and neither the mail nor its page names a code. An unknown or expired device code is 410 DEVICE_CODE_EXPIRED.',
    ),
  })
  .strict();
export type EmailStartBody = z.infer<typeof EmailStartBody>;

export const EmailStartResult = z.object({
  ok: z.literal(true),
  expires_in: z.literal(900).describe('Seconds the mailed link stays valid.'),
  verify_url: z.string().optional().describe('Outside production only: the link that was mailed (or logged).'),
  dev_token: z.string().optional().describe('Outside production only: the token of that link.'),
});

/** An HTML page answered to a browser (the sign-in link's pages); the description says which. */
const htmlPage = (what: string) => c.otherResponse({ contentType: 'text/html', body: z.string().describe(what) });
const LinkPage = htmlPage("The link's page: names the email (and the command-line code the link also approves, if any), with one button that POSTs the token to this path.");
const LinkGonePage = htmlPage('A page saying the link was already used, has expired or is unknown, and how to get a new one.');
const ForeignFormPage = htmlPage('A page saying the form was not posted from this site\'s own page: nothing was spent, open the link again.');
/** What the link's routes answer before a page can be made (a token over 200 characters, a form over 4 KB, the database down): the error body. */
const pageErrors = { 400: ErrorBody, 413: ErrorBody, 500: ErrorBody, 503: ErrorBody } as const;

export const CliStartResult = z.object({
  device_code: z.string().describe('Secret: only the CLI holds it; poll with it.'),
  user_code: z.string().describe('Shown to the person, who types it on the verification page while signed in (the page never takes it from its address).'),
  verification_url: z.string().describe('The dashboard\'s device page, on SVC_PUBLIC_BASE_URL.'),
  interval: z.number().int().describe('Seconds between polls.'),
  expires_in: z.number().int(),
});

export const CliPollResult = z.union([
  z.object({ status: z.literal('pending') }),
  z.object({ status: z.literal('ready'), api_key: ApiKeyWithSecret.describe('A test key of the approving member\'s project; delivered once.') }),
]);
export type CliPollResult = z.infer<typeof CliPollResult>;

const signInRoutes = c.router({
  emailStart: {
    method: 'POST',
    path: '/email/start',
    body: EmailStartBody,
    responses: { 200: EmailStartResult, 410: ErrorBody, 429: ErrorBody },
    summary: 'Mail a sign-in link (magic link)',
    description:
      'Answers 200 for any well-formed email, known or not (no account enumeration). Limited to 5 per email and 20 per IP per 15 minutes (429 RATE_LIMITED with Retry-After).',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Sign-in', operationId: 'startEmailSignIn' }),
  },
  logout: {
    method: 'POST',
    path: '/logout',
    body: c.noBody(),
    responses: { 200: z.object({ ok: z.literal(true) }), 401: ErrorBody, 403: ErrorBody },
    summary: 'End the browser session',
    description: 'Revokes the session of the cookie and clears the cookie.',
    metadata: meta({ auth: 'session', scopes: [], tag: 'Sign-in', operationId: 'logout' }),
  },
  cliStart: {
    method: 'POST',
    path: '/cli/start',
    body: z.object({}).strict().optional(),
    responses: { 200: CliStartResult, 429: ErrorBody },
    summary: 'Start a device-code sign-in (RFC 8628) for the CLI',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Sign-in', operationId: 'startDeviceSignIn' }),
  },
  cliPoll: {
    method: 'POST',
    path: '/cli/poll',
    body: z.object({ device_code: DeviceCodeValue }).strict(),
    responses: { 200: CliPollResult, 410: ErrorBody, 429: ErrorBody },
    summary: 'Poll a device-code sign-in',
    description:
      'pending until a member approves, then ready with a new test API key exactly once; afterwards, or once expired, 410 DEVICE_CODE_EXPIRED. Polling faster than `interval` is 429 SLOW_DOWN (the interval grows by 5 s).',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Sign-in', operationId: 'pollDeviceSignIn' }),
  },
  cliApprove: {
    method: 'POST',
    path: '/cli/approve',
    body: z.object({ user_code: UserCodeValue }).strict(),
    responses: { 200: z.object({ ok: z.literal(true) }), 401: ErrorBody, 403: ErrorBody, 410: ErrorBody },
    summary: 'Approve a device code as the signed-in member',
    description:
      'Needs the session cookie (the device page sends it, with the code the person typed from their own terminal). The minted key belongs to the signed-in member\'s project. An unknown or expired user code is 410 DEVICE_CODE_EXPIRED.',
    metadata: meta({ auth: 'session', scopes: [], tag: 'Sign-in', operationId: 'approveDeviceSignIn' }),
  },
}, { pathPrefix: '/v1/auth', commonResponses: publicErrors });

/** The sign-in link's pages, for a browser: HTML, and the error body only before a page can be made. */
const linkPageRoutes = c.router({
  verify: {
    method: 'GET',
    path: '/verify',
    query: z.object({ token: z.string().max(200).optional() }),
    responses: { 200: LinkPage, 410: LinkGonePage },
    summary: 'Open a sign-in link',
    description:
      'Spends nothing: answers a page that names the email with one button, a form that POSTs the token to this path. Mail scanners that fetch every link in a message therefore cannot use a link up. A link a command line asked for says so (and that its code is typed on the next page); it never names a code. A used, expired or unknown link is 410 with a page that says so.',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Sign-in', operationId: 'openSignInLink' }),
  },
  verifyConfirm: {
    method: 'POST',
    path: '/verify',
    contentType: 'application/x-www-form-urlencoded',
    body: z.object({ token: z.string().max(200).optional() }),
    responses: { 303: c.noBody(), 403: ForeignFormPage, 410: LinkGonePage },
    summary: 'Sign in with a link',
    description:
      "The button of the link's page. Single use, 15 minutes. Sets the HTTP-only session cookie (svc_session; SameSite=Lax; Secure outside development) and redirects (303) to the dashboard, or to its device page (/dashboard/device, where the code is typed) when a command line asked for the link; it approves no device code. A used, expired or unknown link is 410 with a page that says so. A POST that does not come from this origin (its Origin header, else Sec-Fetch-Site: same-origin, as for every cookie-authenticated write) is 403 and spends nothing: only the link's own page signs in, so another site cannot sign a visitor into its own account.",
    metadata: meta({ auth: 'public', scopes: [], tag: 'Sign-in', operationId: 'verifySignIn' }),
  },
}, { pathPrefix: '/v1/auth', commonResponses: pageErrors });

const devicePageRoutes = c.router({
  device: {
    method: 'GET',
    path: '/device',
    responses: { 303: c.noBody(), 400: ErrorBody },
    summary: 'The device verification page',
    description:
      'Redirects (303) to the dashboard\'s device page (/dashboard/device), dropping any code in the address: there the signed-in person types the code their own terminal shows (signed out, they sign in first).',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Sign-in', operationId: 'deviceVerificationPage' }),
  },
}, { pathPrefix: '/v1/auth' });

export const authContract = { ...signInRoutes, ...linkPageRoutes, ...devicePageRoutes };
