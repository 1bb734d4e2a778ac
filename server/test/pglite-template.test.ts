import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Migration } from '@mikro-orm/migrations';
import { migrate, openOrm, pgliteOrigin, type Orm } from '../src/db/orm.js';
import { entities } from '../src/entities.js';
import { pgliteTemplateKey, pgliteTemplatePath, readPgliteTemplate } from '../src/db/pglite-template.js';
import { migrationsList } from '../src/migrations/index.js';
import { ensurePgliteTemplate } from '../../scripts/pglite-template.js';
import type { Logger } from '../src/lib/logger.js';

/** Everything the migrations define, in a comparable form: columns, constraints, indexes, triggers, functions. */
async function schemaOf(orm: Orm): Promise<unknown> {
  const em = orm.em.fork();
  return {
    columns: await em.execute(
      `select table_name, column_name, data_type, is_nullable, column_default from information_schema.columns
        where table_schema = 'public' order by table_name, column_name`,
    ),
    constraints: await em.execute(
      `select conrelid::regclass::text as tbl, conname, pg_get_constraintdef(oid) as def from pg_constraint
        where connamespace = 'public'::regnamespace order by 1, 2`,
    ),
    indexes: await em.execute(`select tablename, indexname, indexdef from pg_indexes where schemaname = 'public' order by 1, 2`),
    triggers: await em.execute(
      `select tgrelid::regclass::text as tbl, tgname, pg_get_triggerdef(oid) as def from pg_trigger where not tgisinternal order by 1, 2`,
    ),
    functions: await em.execute(
      `select proname, prosrc from pg_proc where pronamespace = 'public'::regnamespace order by 1`,
    ),
  };
}

function captureLog() {
  const warnings: string[] = [];
  const log = { warn: (_o: unknown, msg: string) => warnings.push(msg), info: () => undefined, debug: () => undefined } as unknown as Logger;
  return { log, warnings };
}

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-tpl-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('the embedded database template', () => {
  it('is keyed by the SQL of every migration: an edited or added migration never unpacks a stale template', async () => {
    const key = await pgliteTemplateKey();
    expect(key).toMatch(/^[0-9a-f]{24}$/);
    expect(await pgliteTemplateKey()).toBe(key);
    class Edited extends Migration {
      override up(): void {
        this.addSql('create table extra (id int)');
      }
    }
    const last = migrationsList[migrationsList.length - 1]!;
    expect(await pgliteTemplateKey([...migrationsList, { name: 'Migration29991231000000Extra', class: Edited }])).not.toBe(key);
    expect(await pgliteTemplateKey([...migrationsList.slice(0, -1), { name: last.name, class: Edited }])).not.toBe(key);
    // a migration that needs the database to say what it runs cannot be keyed: no template
    class Live extends Migration {
      override async up(): Promise<void> {
        await this.execute('select 1');
      }
    }
    expect(await pgliteTemplateKey([...migrationsList, { name: 'Migration29991231000000Live', class: Live }])).toBeNull();
  });

  it('unpacks a fresh data directory with the same schema initdb and the migrations make, and reopens it as it was', async () => {
    const made = await ensurePgliteTemplate();
    expect(made && existsSync(made.path)).toBe(true);
    expect(made!.path).toBe(pgliteTemplatePath((await pgliteTemplateKey())!));

    const dir = tempDir();
    const fromTemplate = await openOrm({ kind: 'pglite', dataDir: dir }, entities);
    const initdb = await openOrm({ kind: 'pglite', dataDir: null, template: false }, entities);
    try {
      expect(pgliteOrigin(fromTemplate)).toBe('template');
      expect(pgliteOrigin(initdb)).toBe('initdb');
      await migrate(initdb);
      // nothing left to run: the template carries every migration and its log
      expect(await fromTemplate.migrator.getPending()).toEqual([]);
      expect((await fromTemplate.migrator.getExecuted()).map((m) => m.name)).toEqual(migrationsList.map((m) => m.name));
      expect(await schemaOf(fromTemplate)).toEqual(await schemaOf(initdb));
      await fromTemplate.em.fork().execute(`create table probe (name text)`);
      await fromTemplate.em.fork().execute(`insert into probe values ('kept')`);
    } finally {
      await fromTemplate.close();
      await initdb.close();
    }
    const reopened = await openOrm({ kind: 'pglite', dataDir: dir }, entities);
    try {
      expect(pgliteOrigin(reopened)).toBe('existing');
      expect(await reopened.em.fork().execute(`select name from probe`)).toEqual([{ name: 'kept' }]);
    } finally {
      await reopened.close();
    }
  });

  it('an in-memory database unpacks from it too', async () => {
    const orm = await openOrm({ kind: 'pglite', dataDir: null }, entities);
    try {
      expect(pgliteOrigin(orm)).toBe('template');
      expect(await orm.migrator.getPending()).toEqual([]);
    } finally {
      await orm.close();
    }
  });

  it('a damaged template is set aside with a warning and the database is made by initdb', async () => {
    const made = await ensurePgliteTemplate();
    const good = readFileSync(made!.path);
    const flipped = Buffer.from(good);
    flipped[flipped.length >> 1]! ^= 0xff;
    const damaged = {
      'not gzip': Buffer.from('not a gzipped data directory'.repeat(100)),
      truncated: good.subarray(0, good.length >> 1),
      'one byte altered': flipped,
      'gzip of something else': gzipSync(Buffer.alloc(4096, 7)),
    };
    const files = Object.entries(damaged).map(([what, bytes]) => {
      const file = join(tempDir(), 'template.tar.gz');
      writeFileSync(file, bytes);
      return [what, file] as const;
    });
    // WHEN each damaged file is read THEN it is refused before PGlite sees it (gzip's checksum, the tar header)
    for (const [what, file] of files) await expect(readPgliteTemplate(file), what).rejects.toThrow();
    // WHEN a database is opened on one THEN the warning, and initdb makes a database the migrations complete.
    // (One initdb for all four: each costs seconds of CPU, and the refusal above is the same code path.)
    const { log, warnings } = captureLog();
    const orm = await openOrm({ kind: 'pglite', dataDir: tempDir(), template: files[2]![1] }, entities, log);
    try {
      expect(pgliteOrigin(orm)).toBe('initdb');
      expect(warnings).toEqual([expect.stringContaining('template is damaged')]);
      await migrate(orm);
      expect(await orm.migrator.getPending()).toEqual([]);
    } finally {
      await orm.close();
    }
  });

  it('a missing template (no `npm ci` scripts, or a migration newer than the install) falls back to initdb', async () => {
    const orm = await openOrm({ kind: 'pglite', dataDir: tempDir(), template: join(tempDir(), 'absent.tar.gz') }, entities);
    try {
      expect(pgliteOrigin(orm)).toBe('initdb');
    } finally {
      await orm.close();
    }
  });
});
