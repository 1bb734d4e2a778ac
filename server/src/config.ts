import { z } from 'zod';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

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
  SVC_PUBLIC_BASE_URL: z.string().url().optional(),
  SVC_DISCOVERY_DOMAIN: z
    .string()
    .regex(/^[a-z0-9.-]+$/, 'must be a lower-case domain such as checkout.example.com')
    .default('svc.localhost'),
  SVC_SESSION_TTL_SECONDS: z.coerce.number().int().min(30).max(86400).default(900),
  SVC_CHECKOUT_RATE_PER_MINUTE: z.coerce.number().int().min(1).max(100000).default(120),
  SVC_WEBHOOK_RETRY_SCALE: z.coerce.number().positive().max(1000).default(1),
  SVC_RUN_WORKER: bool.default('true'),
  SVC_DB_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  SVC_DB_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
  SVC_DB_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
});

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
