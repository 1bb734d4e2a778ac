import { createCipheriv, createDecipheriv, createHash, generateKeyPairSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, type Config } from '../config.js';

/** AES-256-GCM envelope for secrets at rest: `v1.<iv>.<tag>.<ciphertext>` in base64url. */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('master key must be 32 bytes');
  }

  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(aad));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  }

  /** `aad` binds the ciphertext to its row (e.g. the merchant id) so it cannot be swapped. */
  open(sealed: string, aad: string): string {
    const [v, iv, tag, ct] = sealed.split('.');
    if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('malformed sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }
}

function decodeKey(value: string): Buffer {
  return /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
}

/**
 * SVC_MASTER_KEY when set; in production its absence stops the server; in development a
 * key is generated once into the data directory (with a warning) so restarts can decrypt.
 */
export function resolveMasterKey(config: Config, log?: Logger): Buffer {
  if (config.SVC_MASTER_KEY) return decodeKey(config.SVC_MASTER_KEY);
  if (config.NODE_ENV === 'production') {
    throw new ConfigError('invalid configuration: SVC_MASTER_KEY is required in production');
  }
  const file = join(config.SVC_DATA_DIR, 'master.key');
  if (existsSync(file)) return decodeKey(readFileSync(file, 'utf8').trim());
  mkdirSync(config.SVC_DATA_DIR, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600 });
  log?.warn({ file }, 'SVC_MASTER_KEY is not set: generated a development master key in the data directory; set SVC_MASTER_KEY in production');
  return key;
}

/** SHA-256 as lower-case hex: token and key hashes, request and policy fingerprints. */
export function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Constant-time equality of two strings (false on different lengths, without early exit on content). */
export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  if (ab.length !== bb.length) {
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}

export function randomToken(bytes: number): string {
  return randomBytes(bytes).toString('base64url');
}

/** A fresh Ed25519 key pair as JWK parts: `d` is the private seed, `x` the public key. */
export function generateEd25519(): { d: string; x: string } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = privateKey.export({ format: 'jwk' });
  if (!jwk.d || !jwk.x) throw new Error('ed25519 key export failed');
  return { d: jwk.d, x: jwk.x };
}
