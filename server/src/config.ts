import { z } from 'zod';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

const httpUrl = z
  .string()
  .url('must be an http(s) URL')
  .regex(/^https?:\/\//i, 'must be an http(s) URL');

/** Comma-separated contract addresses (ERC-6492 wallet factories); an empty value is an empty list. */
const addressList = z.string().transform((raw, ctx) => {
  const list = raw.split(',').map((a) => a.trim()).filter((a) => a !== '');
  for (const [i, a] of list.entries()) {
    if (!/^0x[0-9a-fA-F]{40}$/.test(a)) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `entry ${i + 1} is not a 0x-prefixed 20-byte hex address` });
      return z.NEVER;
    }
  }
  return list.map((a) => a.toLowerCase() as `0x${string}`);
});

/** Comma-separated relayer keys; the message names the bad entry's position, never its text. */
const relayerKeys = z.string().transform((raw, ctx) => {
  const keys = raw.split(',').map((k) => k.trim());
  for (const [i, k] of keys.entries()) {
    const n = /^0x[0-9a-fA-F]{64}$/.test(k) ? BigInt(k) : 0n;
    if (n === 0n || n >= SECP256K1_N) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `entry ${i + 1} is not a 0x-prefixed 32-byte hex secp256k1 private key` });
      return z.NEVER;
    }
  }
  if (new Set(keys.map((k) => k.toLowerCase())).size !== keys.length) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'lists the same key twice' });
    return z.NEVER;
  }
  return keys as `0x${string}`[];
});

/** `Name: value` sends that header; a bare value is sent as `Authorization: <value>`. */
const authHeader = z.string().transform((raw, ctx) => {
  const m = /^([A-Za-z0-9-]+):\s*(\S.*)$/.exec(raw.trim());
  const header = m ? { name: m[1]!, value: m[2]!.trim() } : { name: 'Authorization', value: raw.trim() };
  if (/[\r\n]/.test(header.value)) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be one line' });
    return z.NEVER;
  }
  return header;
});

const ConfigSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  SVC_DATA_DIR: z.string().min(1).default('.data'),
  SVC_MASTER_KEY: z
    .string()
    .regex(/^(?:[0-9a-fA-F]{64}|[A-Za-z0-9+/]{43}=)$/, 'must be 32 bytes as 64 hex characters or base64')
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** The public origin every absolute URL the service hands out starts with; never the request's Host. Required in production. */
  SVC_PUBLIC_BASE_URL: z
    .string()
    .transform((raw, ctx) => {
      let url: URL | null = null;
      try {
        url = new URL(raw);
      } catch {
        url = null;
      }
      if (!url || !/^https?:$/.test(url.protocol) || url.username || url.password || url.pathname !== '/' || url.search || url.hash || raw.includes('?') || raw.includes('#')) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be an http(s) origin such as https://checkout.example.com (scheme, host and optional port; no path, query or credentials)' });
        return z.NEVER;
      }
      return url.origin;
    })
    .optional(),
  SVC_DISCOVERY_DOMAIN: z
    .string()
    .regex(/^[a-z0-9.-]+$/, 'must be a lower-case domain such as checkout.example.com')
    .default('svc.localhost'),
  SVC_SESSION_TTL_SECONDS: z.coerce.number().int().min(30).max(86400).default(900),
  SVC_CHECKOUT_RATE_PER_MINUTE: z.coerce.number().int().min(1).max(100000).default(120),
  SVC_WEBHOOK_RETRY_SCALE: z.coerce.number().positive().max(1000).default(1),
  /** Outside production only: test-mode outbound URLs (webhooks, issuer JWKS) may reach private, link-local and reserved addresses (lib/ssrf.ts). */
  SVC_ALLOW_PRIVATE_URLS: bool.default('false'),
  SVC_RUN_WORKER: bool.default('true'),
  SVC_DB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  /** Server processes `npm start` runs (node:cluster, PostgreSQL only); each has its own pool of SVC_DB_POOL_MAX connections. */
  SVC_WEB_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(1),
  /** Worker threads per process for EIP-712 signer recovery; 0 recovers on the request thread. Unset: the process's share of the cores. */
  SVC_SIGNER_THREADS: z.coerce.number().int().min(0).max(64).optional(),
  /** How far the heap grows past its live set after a full collection, in percent (lib/heap.ts); 0 = V8's own choice. */
  SVC_HEAP_GROWTH_PERCENT: z.coerce.number().int().min(0).max(300).default(30),
  /** How long a settle waits for the chain before answering 202 settlement_pending. */
  SVC_SETTLE_WAIT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /** How often the settlement worker looks for unresolved attempts and lapsed holds. */
  SVC_RECONCILE_INTERVAL_MS: z.coerce.number().int().min(50).max(600_000).default(1_000),
  /** Live-mode settlement: unset = live settles answer 503 FACILITATOR_UNAVAILABLE. */
  SVC_LIVE_FACILITATOR: z.enum(['onchain', 'remote'], { message: 'must be onchain or remote' }).optional(),
  SVC_RPC_URL_BASE: httpUrl.optional(),
  SVC_RELAYER_PRIVATE_KEYS: relayerKeys.optional(),
  /** Test mode's chain (Base Sepolia): the mock facilitator checks smart-contract wallets' signatures (EIP-1271, ERC-6492) on it; unset = it refuses them. */
  SVC_RPC_URL_BASE_SEPOLIA: httpUrl.optional(),
  /** Factories an ERC-6492 signature may deploy an undeployed payer wallet through (both modes); unset = none. */
  SVC_ERC6492_FACTORIES: addressList.default(''),
  SVC_FACILITATOR_URL: httpUrl.optional(),
  SVC_FACILITATOR_AUTH_HEADER: authHeader.optional(),
  SVC_RELAYER_MIN_BALANCE_WEI: z
    .string()
    .regex(/^\d{1,30}$/, 'must be a non-negative integer number of wei')
    .transform((v) => BigInt(v))
    .optional(),
  SVC_DB_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
  SVC_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces').optional(),
  SVC_DB_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
  /** The most one HTTP request waits on PostgreSQL in total (pool, connecting, statements) before it answers 503 DATABASE_UNAVAILABLE. */
  SVC_DB_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(4500),
  /** Sign-in mail over SMTP (smtp:// or smtps://, credentials in the URL); unset = the link is logged at info. */
  SVC_SMTP_URL: z
    .string()
    .regex(/^smtps?:\/\//, 'must be an smtp:// or smtps:// URL')
    .optional(),
  SVC_MAIL_FROM: z.string().min(3).default('svc-checkout <no-reply@svc.localhost>'),
  /** Browser session lifetime (the cookie's Max-Age). */
  SVC_USER_SESSION_TTL_SECONDS: z.coerce.number().int().min(60).max(90 * 86_400).default(7 * 86_400),
}).superRefine((c, ctx) => {
  const need = (path: string, message: string) => ctx.addIssue({ code: z.ZodIssueCode.custom, path: [path], message });
  if (c.NODE_ENV === 'production' && c.SVC_ALLOW_PRIVATE_URLS) {
    need('SVC_ALLOW_PRIVATE_URLS', 'must not be true with NODE_ENV=production: production applies the live URL rules (https, public addresses only) in both modes; unset it');
  }
  if (c.SVC_WEB_CONCURRENCY > 1 && !c.DATABASE_URL) {
    need('SVC_WEB_CONCURRENCY', `must be 1 on the embedded PGlite database (it is single-process); set DATABASE_URL to a PostgreSQL database to run ${c.SVC_WEB_CONCURRENCY} server processes`);
  }
  if (
    c.SVC_WEB_CONCURRENCY > 1 &&
    c.SVC_LIVE_FACILITATOR === 'onchain' &&
    c.SVC_RELAYER_PRIVATE_KEYS &&
    c.SVC_RELAYER_PRIVATE_KEYS.length < c.SVC_WEB_CONCURRENCY
  ) {
    need(
      'SVC_RELAYER_PRIVATE_KEYS',
      `has ${c.SVC_RELAYER_PRIVATE_KEYS.length} key(s) for SVC_WEB_CONCURRENCY=${c.SVC_WEB_CONCURRENCY}: each server process broadcasts from its own relayer keys, so give at least one per process`,
    );
  }
  if (c.NODE_ENV === 'production' && !c.SVC_PUBLIC_BASE_URL) {
    need('SVC_PUBLIC_BASE_URL', 'is required when NODE_ENV=production: the public origin of sign-in links and every other URL the service hands out, such as https://checkout.example.com (never taken from the request\'s Host header)');
  }
  if (!c.SVC_LIVE_FACILITATOR) return;
  if (!c.SVC_RPC_URL_BASE) need('SVC_RPC_URL_BASE', `is required when SVC_LIVE_FACILITATOR=${c.SVC_LIVE_FACILITATOR}`);
  if (c.SVC_LIVE_FACILITATOR === 'onchain' && !c.SVC_RELAYER_PRIVATE_KEYS) need('SVC_RELAYER_PRIVATE_KEYS', 'is required when SVC_LIVE_FACILITATOR=onchain');
  if (c.SVC_LIVE_FACILITATOR === 'remote' && !c.SVC_FACILITATOR_URL) need('SVC_FACILITATOR_URL', 'is required when SVC_LIVE_FACILITATOR=remote');
}).transform((c) => ({
  ...c,
  // Outside production the default comes from configuration too (the port this process listens on), so the README's walk-through works.
  SVC_PUBLIC_BASE_URL: c.SVC_PUBLIC_BASE_URL ?? `http://localhost:${c.PORT}`,
}));

export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {}

/** Reads and validates the environment once; the message names the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = ConfigSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`invalid configuration: ${issue.path.join('.')} ${issue.message}`);
  }
  return parsed.data;
}
