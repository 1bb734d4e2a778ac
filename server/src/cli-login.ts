import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfig } from './config.js';

export const LOGIN_USAGE = `usage: npm run svc -- login [--url <SVC_PUBLIC_BASE_URL, else http://localhost:$PORT>] [--email you@example.com] [--out <file>]
  Signs in with the device-code flow against a running server and prints a new test API key
  (or writes it to --out, mode 0600). Nothing is stored. Open the printed URL in a browser,
  sign in (--email mails you a link to it) and type the code this command shows.`;

export class LoginError extends Error {}

type Io = { stderr: (line: string) => void; sleep?: (ms: number) => Promise<void>; fetch?: typeof fetch; env?: NodeJS.ProcessEnv };

/**
 * Without --url the CLI talks to the server its environment configures, by the server's own
 * rule (config.ts): SVC_PUBLIC_BASE_URL, else http://localhost:$PORT (default 3000).
 */
function serverUrlOf(env: NodeJS.ProcessEnv): string {
  try {
    return loadConfig(env).SVC_PUBLIC_BASE_URL;
  } catch (err) {
    throw new LoginError(`${err instanceof Error ? err.message : String(err)} (--url sets the server's URL)`);
  }
}

async function postJson(f: typeof fetch, url: string, body: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  let res: Response;
  try {
    res = await f(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(15_000) });
  } catch (err) {
    throw new LoginError(`cannot reach ${new URL(url).origin}: ${err instanceof Error ? err.message : String(err)} (is the server running? --url sets where)`);
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

const humanOf = (r: { status: number; body: any }) => (typeof r.body === 'object' && r.body?.error_human) || `HTTP ${r.status}`;

/**
 * `svc login`: RFC 8628 device authorization against a running server. Returns what goes to
 * stdout (the key, or where it was written); progress goes to stderr.
 */
export async function runLogin(argv: string[], io: Io): Promise<string> {
  const { values } = parseArgs({ args: argv, options: { url: { type: 'string' }, email: { type: 'string' }, out: { type: 'string' } }, strict: true });
  const f = io.fetch ?? fetch;
  const sleep = io.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let base: string;
  try {
    base = new URL(values.url ?? serverUrlOf(io.env ?? process.env)).origin;
  } catch (err) {
    if (err instanceof LoginError) throw err;
    throw new LoginError(`--url must be a URL such as http://localhost:3000, got ${values.url}`);
  }

  const started = await postJson(f, `${base}/v1/auth/cli/start`, {});
  if (started.status !== 200) throw new LoginError(`could not start the login: ${humanOf(started)}`);
  const dc = started.body as { device_code: string; user_code: string; verification_url: string; interval: number; expires_in: number };
  io.stderr(`Your code: ${dc.user_code}`);
  io.stderr(`Open ${dc.verification_url} signed in and type this code (valid ${Math.round(dc.expires_in / 60)} minutes).`);
  if (values.email) {
    const mailed = await postJson(f, `${base}/v1/auth/email/start`, { email: values.email, device_code: dc.device_code });
    if (mailed.status !== 200) throw new LoginError(`could not send the sign-in link: ${humanOf(mailed)}`);
    io.stderr(`To sign in, follow the link sent to ${values.email}: it opens that page, where you type the code.`);
    if (typeof mailed.body?.verify_url === 'string') io.stderr(`Development server: the link is ${mailed.body.verify_url}`);
  }
  io.stderr('Waiting for approval…');

  let interval = dc.interval;
  const deadline = Date.now() + dc.expires_in * 1000;
  for (;;) {
    await sleep(interval * 1000);
    if (Date.now() > deadline) throw new LoginError('the login expired before it was approved; run it again');
    const polled = await postJson(f, `${base}/v1/auth/cli/poll`, { device_code: dc.device_code });
    if (polled.status === 200 && polled.body?.status === 'pending') continue;
    if (polled.status === 429) {
      // slow_down (RFC 8628 3.5): wait longer from now on.
      interval = Math.max(interval + 5, Number(polled.headers.get('retry-after')) || 0);
      continue;
    }
    if (polled.status === 200 && polled.body?.status === 'ready') {
      const key = polled.body.api_key as { id: string; secret: string; mode: string };
      if (values.out) {
        writeFileSync(values.out, `${key.secret}\n`, { mode: 0o600 });
        return `wrote test key ${key.id} to ${values.out}`;
      }
      io.stderr(`Signed in. New ${key.mode} key ${key.id} (shown once):`);
      return key.secret;
    }
    throw new LoginError(polled.status === 410 ? 'the login expired or was already used; run it again' : `login failed: ${humanOf(polled)}`);
  }
}
