import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root and the entry points, run the way `npm run svc` / `npm start` run them: tsx under this Node. */
export const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
export const TSX = join(ROOT, 'node_modules/.bin/tsx');
export const CLI = join(ROOT, 'server/src/cli.ts');
export const MAIN = join(ROOT, 'server/src/main.ts');

export type Run = { code: number | null; stdout: string; stderr: string };

/** Runs a command to completion, capturing its output; `undefined` in `env` removes that variable. */
export function runCommand(cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string | undefined>; timeoutMs?: number } = {}): Promise<Run> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, ...opts.env })) if (v !== undefined) env[k] = v;
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: opts.timeoutMs ?? 150_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

/** Runs a TypeScript entry point (tsx under this Node) to completion. */
export function runScript(script: string, args: string[], env: Record<string, string | undefined>, timeoutMs = 150_000): Promise<Run> {
  return runCommand(process.execPath, [TSX, script, ...args], { env, timeoutMs });
}

/** A TCP port free on loopback right now (for a server process a test starts). */
export async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => done(port));
    });
  });
}
