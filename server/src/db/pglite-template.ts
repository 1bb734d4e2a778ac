import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { migrationsList } from '../migrations/index.js';

/**
 * The embedded database's install-time template: a gzipped PGlite data directory with every
 * committed migration applied, written once by `npm ci` (scripts/postinstall.mjs → scripts/pglite-template.ts) under
 * node_modules/.cache/svc-checkout/. A fresh data directory (or an in-memory test database) is
 * unpacked from it in about 0.5 s instead of running initdb and the migrations (about 2.5 s on
 * a 2-core machine), which is most of a fresh clone's first `npm start`.
 *
 * The file is named by a key over the PGlite version and the SQL every migration runs, so a
 * new or edited migration or another PGlite never unpacks a stale template: the key misses
 * and the database is created the slow way. Nothing in it is per install: the migrations
 * create schema only (no rows but MikroORM's own migration log), keys and secrets are made
 * at first start in the data directory, never in the template.
 */

type MigrationCtor = new (driver: never, config: never) => { up(): void | Promise<void>; getQueries(): unknown[] };

let installed: { dir: string; version: string } | null | undefined;

/** The installed @electric-sql/pglite package: its directory and version, or null when it cannot be found. */
function pglitePackage(): { dir: string; version: string } | null {
  if (installed !== undefined) return installed;
  installed = null;
  try {
    let dir = dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
    for (let i = 0; i < 4; i++) {
      try {
        const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
        if (pkg.name === '@electric-sql/pglite' && pkg.version) return (installed = { dir, version: pkg.version });
      } catch {
        /* not this level */
      }
      dir = dirname(dir);
    }
  } catch {
    /* not installed: no template */
  }
  return installed;
}

/** The committed migrations' key, computed once per process (every fresh database asks for it). */
let committedKey: Promise<string | null> | undefined;

/**
 * The template's key: the PGlite version and every migration's name and SQL (each migration
 * is instantiated and its `up()` run to collect what it would send). Null when a migration
 * needs a live database to say what it runs, or PGlite's package is not found.
 */
export function pgliteTemplateKey(migrations?: readonly { name: string; class: unknown }[]): Promise<string | null> {
  if (migrations) return keyOf(migrations);
  return (committedKey ??= keyOf(migrationsList));
}

async function keyOf(migrations: readonly { name: string; class: unknown }[]): Promise<string | null> {
  const pkg = pglitePackage();
  if (!pkg) return null;
  const hash = createHash('sha256');
  try {
    hash.update(`pglite ${pkg.version}\n`);
    for (const m of migrations) {
      // Only up() is read, for its SQL text: the migration is built without a driver or config.
      const migration = new (m.class as unknown as MigrationCtor)(undefined as never, undefined as never);
      await migration.up();
      hash.update(`${m.name}\n${JSON.stringify(migration.getQueries().map(String))}\n`);
    }
  } catch {
    return null;
  }
  return hash.digest('hex').slice(0, 24);
}

/** Where the template for `key` lives: node_modules/.cache/svc-checkout/, beside the PGlite it was made with. */
export function pgliteTemplatePath(key: string): string | null {
  const pkg = pglitePackage();
  if (!pkg) return null;
  return join(dirname(dirname(pkg.dir)), '.cache', 'svc-checkout', `pglite-${key}.tar.gz`);
}

/** Where the template for the committed migrations and the installed PGlite lives; null when none can be made here. */
export async function currentPgliteTemplatePath(): Promise<string | null> {
  const key = await pgliteTemplateKey();
  return key ? pgliteTemplatePath(key) : null;
}

/**
 * The template as an uncompressed tar for PGlite's `loadDataDir`, or null when there is none for
 * the current key (none was made, or it is stale). Throws when the file is there but damaged:
 * it is unpacked here, where gzip's checksum catches a truncated or altered file, rather than by
 * PGlite, whose gunzip stream would raise the error outside any promise.
 */
export async function readPgliteTemplate(file?: string): Promise<Blob | null> {
  const path = file ?? (await currentPgliteTemplatePath());
  if (!path) return null;
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch {
    return null;
  }
  const tar = gunzipSync(bytes);
  if (tar.length < 512 || tar.toString('latin1', 257, 262) !== 'ustar') throw new Error(`${path} is not a tar archive`);
  return new Blob([tar]);
}

/** Writes `bytes` as the template at `file`, atomically (a reader sees the whole file or none). */
export function writePgliteTemplate(file: string, bytes: Uint8Array): void {
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, bytes);
    renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
}
