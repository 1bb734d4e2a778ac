import { closeServices, createServices } from './boot.js';
import { ConfigError, loadConfig } from './config.js';
import { DataDirInUseError } from './db/orm.js';
import type { Services } from './services.js';
import { LOGIN_USAGE, LoginError, runLogin } from './cli-login.js';
import { parseCommand, readOperatorFile, USAGE, UsageError } from './modules/operator/index.js';
import { DevUsageError, runDev } from './dev-chain/commands.js';

/** `svc login` talks to a running server over HTTP and never opens the database. */
async function login(argv: string[]) {
  try {
    const out = await runLogin(argv, { stderr: (line) => process.stderr.write(`${line}\n`) });
    process.stdout.write(`${out}\n`);
    process.exit(0);
  } catch (err) {
    const usage = err instanceof Error && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS') ? `\n${LOGIN_USAGE}` : '';
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}${usage}\n`);
    process.exit(err instanceof LoginError || usage ? 2 : 1);
  }
}

/** `svc dev chain|balance` talk to a local chain and never open the database. */
async function dev(argv: string[]) {
  try {
    process.exit(await runDev(argv, (line) => process.stdout.write(`${line}\n`)));
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(err instanceof DevUsageError ? 2 : 1);
  }
}

/**
 * The embedded database is open in the running server (PGlite is single-process): hand the
 * command to that server over its local operator channel instead of asking to stop it.
 */
async function viaRunningServer(dataDir: string, argv: string[]): Promise<boolean> {
  const channel = readOperatorFile(dataDir);
  if (!channel) return false;
  let res: Response;
  try {
    res = await fetch(`${channel.url}/v1/operator/cli`, {
      method: 'POST',
      headers: { authorization: `Bearer ${channel.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ argv }),
      signal: AbortSignal.timeout(30_000),
    });
  } catch {
    return false;
  }
  const body = (await res.json().catch(() => ({}))) as { output?: string; error_human?: string };
  if (res.ok && typeof body.output === 'string') {
    process.stdout.write(body.output + '\n');
    process.exit(0);
  }
  process.stderr.write(`${body.error_human ?? `the running server answered ${res.status}`}\n`);
  process.exit(2);
}

async function main() {
  if (process.argv[2] === 'login') return login(process.argv.slice(3));
  if (process.argv[2] === 'dev') return dev(process.argv.slice(3));
  let services: Services | undefined;
  try {
    // Parsed before the database opens: --help and usage errors need no database (and no lock).
    const parsed = parseCommand(process.argv.slice(2));
    if (parsed.help) {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    const config = loadConfig();
    try {
      services = await createServices({ ...config, LOG_LEVEL: process.env.LOG_LEVEL ? config.LOG_LEVEL : 'warn' });
    } catch (err) {
      if (err instanceof DataDirInUseError && (await viaRunningServer(config.SVC_DATA_DIR, process.argv.slice(2)))) return;
      throw err;
    }
    const out = await parsed.command.run(parsed.values, parsed.positionals, services);
    process.stdout.write(out + '\n');
    await closeServices(services);
    process.exit(0);
  } catch (err) {
    if (err instanceof UsageError || err instanceof ConfigError || err instanceof DataDirInUseError) process.stderr.write(`${err.message}\n`);
    else process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    if (services) await closeServices(services).catch(() => undefined);
    process.exit(2);
  }
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) void main();
