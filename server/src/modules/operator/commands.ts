import { parseArgs, type ParseArgsConfig } from 'node:util';
import { isScope, SCOPES, type Scope } from '@svc/contract';
import type { Orm } from '../../db/orm.js';
import { createApiKey, createProject, getProject, listApiKeys, listProjects, revokeApiKey } from '../accounts/index.js';
import { installationDefaultProject } from '../auth/index.js';

/**
 * The admin CLI's commands (projects, keys), run by `npm run svc` (src/cli.ts) on its own
 * database, or by the running server for it over the operator channel (./routes.ts).
 */

/** What a command needs of the process: the database and the clock. */
export type CommandServices = { orm: Orm; now: () => Date };

export const USAGE = `usage: npm run svc -- <command> [options]

commands:
  login [--url <url>] [--email you@example.com] [--out <file>]
                                              sign in to a running server (no database access; the URL
                                              defaults to SVC_PUBLIC_BASE_URL, else http://localhost:$PORT)
  dev chain [--port 8545]                     a local Base with the test USDC for live mode (npm run chain)
  dev balance <address>... [--rpc <url>]      USDC and ETH balances on that chain
  projects create --name <name> [--json]      create a project (and its organization)
  projects list [--json]                      list projects
  keys create --mode test|live [--project proj_...] [--scopes a,b,...] [--name n] [--json]
                                              mint an API key; the secret is shown once
  keys list [--project proj_...] [--mode test|live] [--revoked] [--json]
                                              list keys (id, mode, last four, name; never secrets)
  keys revoke <key_id>                        revoke a key

options:
  -h, --help                                  show this help and exit

Opens the same database as the server (DATABASE_URL, or the embedded PGlite in SVC_DATA_DIR;
while a server holds that directory the command runs in it over its local operator channel).
Results on stdout, logs on stderr; a usage error exits 2.`;

export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;
type Command = {
  options: Options;
  /** Positional arguments after the command words. */
  positionals?: string[];
  run(values: Record<string, string | boolean | undefined>, positionals: string[], services: CommandServices): Promise<string>;
};

const json = { type: 'boolean' } as const;

const COMMANDS: Record<string, Command> = {
  'projects create': {
    options: { name: { type: 'string' }, json },
    async run(values, _p, services) {
      const name = typeof values.name === 'string' ? values.name.trim() : '';
      if (!name) throw new UsageError('projects create needs --name <name>');
      const project = await createProject(services.orm.em.fork(), name, { now: services.now() });
      return values.json ? JSON.stringify({ id: project.id, name: project.name, organization_id: project.organizationId }) : project.id;
    },
  },
  'projects list': {
    options: { json },
    async run(values, _p, services) {
      const projects = await listProjects(services.orm.em.fork());
      const rows = projects.map((p) => ({ id: p.id, name: p.name, organization_id: p.organizationId, is_default: p.isDefault, created_at: p.createdAt.toISOString() }));
      if (values.json) return JSON.stringify(rows);
      if (rows.length === 0) return '(no projects)';
      return rows.map((r) => `${r.id}  ${r.name}${r.is_default ? '  (default)' : ''}`).join('\n');
    },
  },
  'keys create': {
    options: { mode: { type: 'string' }, project: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' }, json },
    async run(values, _p, services) {
      const em = services.orm.em.fork();
      if (values.mode !== 'test' && values.mode !== 'live') throw new UsageError('keys create needs --mode test|live');
      let scopes: Scope[] | undefined;
      if (typeof values.scopes === 'string') {
        const list = values.scopes.split(',').map((s) => s.trim()).filter(Boolean);
        const unknown = list.filter((s) => !isScope(s));
        if (unknown.length || list.length === 0) throw new UsageError(`unknown scope(s): ${unknown.join(', ') || '(none given)'}; known: ${SCOPES.join(', ')}`);
        scopes = [...new Set(list)] as Scope[];
      }
      let projectId: string;
      if (typeof values.project === 'string') {
        const project = await getProject(em, values.project);
        if (!project) throw new UsageError(`no project ${values.project}`);
        projectId = project.id;
      } else {
        projectId = (await installationDefaultProject(em, services.now())).id;
      }
      const name = typeof values.name === 'string' ? values.name : null;
      const { key, secret } = await createApiKey(em, { projectId, mode: values.mode, scopes, name, now: services.now() });
      if (values.json) {
        return JSON.stringify({ id: key.id, secret, mode: key.mode, scopes: key.scopes, project_id: key.projectId, name: key.name ?? null });
      }
      return `${secret}\n(key ${key.id}, ${key.mode} mode, project ${key.projectId}; the secret is shown once)`;
    },
  },
  'keys list': {
    options: { project: { type: 'string' }, mode: { type: 'string' }, revoked: { type: 'boolean' }, json },
    async run(values, _p, services) {
      if (values.mode !== undefined && values.mode !== 'test' && values.mode !== 'live') throw new UsageError('keys list --mode must be test or live');
      const keys = await listApiKeys(services.orm.em.fork(), {
        ...(typeof values.project === 'string' ? { projectId: values.project } : {}),
        ...(values.mode === 'test' || values.mode === 'live' ? { mode: values.mode } : {}),
        includeRevoked: values.revoked === true,
      });
      const rows = keys.map((k) => ({
        id: k.id,
        mode: k.mode,
        last4: k.last4,
        name: k.name ?? null,
        project_id: k.projectId,
        scopes: k.scopes,
        created_at: k.createdAt.toISOString(),
        last_used_at: k.lastUsedAt?.toISOString() ?? null,
        revoked_at: k.revokedAt?.toISOString() ?? null,
      }));
      if (values.json) return JSON.stringify(rows);
      if (rows.length === 0) return '(no keys)';
      return rows
        .map((r) => `${r.id}  ${r.mode}  …${r.last4}  ${r.project_id}  ${r.name ?? '-'}${r.revoked_at ? `  revoked ${r.revoked_at}` : ''}`)
        .join('\n');
    },
  },
  'keys revoke': {
    options: {},
    positionals: ['key_id'],
    async run(_v, positionals, services) {
      const id = positionals[0];
      if (!id) throw new UsageError('keys revoke needs <key_id>');
      if (!(await revokeApiKey(services.orm.em.fork(), id, services.now()))) throw new UsageError(`no key ${id}`);
      return `revoked ${id}`;
    },
  },
};

export type ParsedCommand = { help: true } | { help: false; name: string; command: Command; values: Record<string, string | boolean | undefined>; positionals: string[] };

/** Parses argv (without node and the script) with node:util parseArgs; throws UsageError naming what is wrong. */
export function parseCommand(argv: string[]): ParsedCommand {
  const words: string[] = [];
  for (const a of argv) {
    if (a.startsWith('-')) break;
    words.push(a);
    if (words.length === 2) break;
  }
  if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') return { help: true };
  const name = words.join(' ');
  const command = COMMANDS[name];
  if (!command) {
    const group = words[0] ?? argv[0]!;
    const known = Object.keys(COMMANDS).filter((c) => c.startsWith(`${group} `));
    throw new UsageError(
      known.length
        ? `unknown command "${name || group}"; ${group} takes: ${known.map((c) => c.split(' ')[1]).join(', ')} (npm run svc -- --help)`
        : `unknown command "${name || group}"; commands: ${Object.keys(COMMANDS).join(', ')} (npm run svc -- --help)`,
    );
  }
  const rest = argv.slice(2);
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { ...command.options, help: { type: 'boolean', short: 'h' } }, allowPositionals: (command.positionals?.length ?? 0) > 0, strict: true });
  } catch (err) {
    throw new UsageError(`${name}: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
  if (parsed.values.help) return { help: true };
  if (parsed.positionals.length > (command.positionals?.length ?? 0)) throw new UsageError(`${name}: unexpected argument "${parsed.positionals.at(-1)}"`);
  return { help: false, name, command, values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals };
}

/** Admin CLI over the same database as the server; results on stdout, logs on stderr. */
export async function runCli(argv: string[], services: CommandServices): Promise<string> {
  const parsed = parseCommand(argv);
  if (parsed.help) return USAGE;
  return parsed.command.run(parsed.values, parsed.positionals, services);
}
