import { parseArgs } from 'node:util';
import { SCOPES, type Scope } from '@svc/contract';
import { createServices } from './boot.js';
import { ConfigError, loadConfig } from './config.js';
import { createApiKey, createProject, defaultProject, getProject, revokeApiKey } from './modules/accounts/service.js';
import type { Services } from './services.js';

const USAGE = `usage: npm run svc -- <command>
  projects create --name <name> [--json]
  keys create --mode test|live [--project proj_...] [--scopes a,b,...] [--name n] [--json]
  keys revoke <key_id>`;

class UsageError extends Error {}

/** Admin CLI over the same database as the server; results on stdout, logs on stderr. */
export async function runCli(argv: string[], services: Services): Promise<string> {
  const [group, action, ...rest] = argv;
  const em = services.orm.em.fork();
  if (group === 'projects' && action === 'create') {
    const { values } = parseArgs({ args: rest, options: { name: { type: 'string' }, json: { type: 'boolean' } }, strict: true });
    if (!values.name?.trim()) throw new UsageError('projects create needs --name <name>');
    const project = await createProject(em, values.name.trim());
    return values.json ? JSON.stringify({ id: project.id, name: project.name, organization_id: project.organizationId }) : project.id;
  }
  if (group === 'keys' && action === 'create') {
    const { values } = parseArgs({
      args: rest,
      options: { mode: { type: 'string' }, project: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' }, json: { type: 'boolean' } },
      strict: true,
    });
    if (values.mode !== 'test' && values.mode !== 'live') throw new UsageError('keys create needs --mode test|live');
    let scopes: Scope[] | undefined;
    if (values.scopes !== undefined) {
      const list = values.scopes.split(',').map((s) => s.trim()).filter(Boolean);
      const unknown = list.filter((s) => !(SCOPES as readonly string[]).includes(s));
      if (unknown.length || list.length === 0) throw new UsageError(`unknown scope(s): ${unknown.join(', ') || '(none given)'}; known: ${SCOPES.join(', ')}`);
      scopes = [...new Set(list)] as Scope[];
    }
    let projectId: string;
    if (values.project) {
      const project = await getProject(em, values.project);
      if (!project) throw new UsageError(`no project ${values.project}`);
      projectId = project.id;
    } else {
      projectId = (await defaultProject(em)).id;
    }
    const { key, secret } = await createApiKey(em, { projectId, mode: values.mode, scopes, name: values.name ?? null });
    if (values.json) {
      return JSON.stringify({ id: key.id, secret, mode: key.mode, scopes: key.scopes, project_id: key.projectId, name: key.name ?? null });
    }
    return `${secret}\n(key ${key.id}, ${key.mode} mode, project ${key.projectId}; the secret is shown once)`;
  }
  if (group === 'keys' && action === 'revoke') {
    const id = rest[0];
    if (!id) throw new UsageError('keys revoke needs <key_id>');
    if (!(await revokeApiKey(em, id))) throw new UsageError(`no key ${id}`);
    return `revoked ${id}`;
  }
  throw new UsageError(USAGE);
}

async function main() {
  let services: Services | undefined;
  try {
    const config = loadConfig();
    services = await createServices({ ...config, LOG_LEVEL: process.env.LOG_LEVEL ? config.LOG_LEVEL : 'warn' });
    const out = await runCli(process.argv.slice(2), services);
    process.stdout.write(out + '\n');
    await services.orm.close();
    process.exit(0);
  } catch (err) {
    if (err instanceof UsageError || err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
    else if (err instanceof Error && err.name === 'TypeError' && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS')) process.stderr.write(`${err.message}\n${USAGE}\n`);
    else process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    await services?.orm.close().catch(() => undefined);
    process.exit(2);
  }
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) void main();
