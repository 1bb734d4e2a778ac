import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomToken, safeEqual, sha256 } from '../../lib/crypto.js';

export const OPERATOR_FILE = 'operator.json';
const TOKEN_RE = /^svc_op_[A-Za-z0-9_-]{43}$/;

/** What the server writes for the admin CLI: where it listens and the token (mode 0600). */
export type OperatorFile = { url: string; token: string; pid: number };

/**
 * The running server's operator channel. Only the token's SHA-256 stays in memory; the token
 * itself is in the data directory's operator.json, readable by the server's user only.
 */
export class OperatorChannel {
  private tokenHash: string | null = null;
  private file: string | null = null;

  /** Opens the channel for a server listening on `port` (loopback URL), writing the file. */
  open(dataDir: string, port: number): void {
    const token = `svc_op_${randomToken(32)}`;
    this.file = join(dataDir, OPERATOR_FILE);
    const content: OperatorFile = { url: `http://127.0.0.1:${port}`, token, pid: process.pid };
    rmSync(this.file, { force: true });
    writeFileSync(this.file, JSON.stringify(content), { mode: 0o600, flag: 'wx' });
    this.tokenHash = sha256(token);
  }

  /** True for the current token (constant-time), false when closed or wrong. */
  accepts(token: string): boolean {
    if (!this.tokenHash || !TOKEN_RE.test(token)) return false;
    return safeEqual(sha256(token), this.tokenHash);
  }

  close(): void {
    this.tokenHash = null;
    if (this.file) rmSync(this.file, { force: true });
    this.file = null;
  }
}

/** The CLI's side: the running server's channel, or null when there is none. */
export function readOperatorFile(dataDir: string): OperatorFile | null {
  try {
    const parsed = JSON.parse(readFileSync(join(dataDir, OPERATOR_FILE), 'utf8')) as OperatorFile;
    return typeof parsed.url === 'string' && typeof parsed.token === 'string' ? parsed : null;
  } catch {
    return null;
  }
}
