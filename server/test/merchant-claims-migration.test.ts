import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openOrm, type DbTarget, type Orm } from '../src/db/orm.js';
import { entities } from '../src/entities.js';
import { createScratchDatabase } from '../src/db/scratch.js';

/**
 * Migration MerchantClaims on a database that holds what the old rule allowed: one slug used
 * by two projects (one per mode). The project of the slug's first-created merchant keeps it,
 * the other project's merchant is renamed, every slug is claimed by its project, and from then
 * on the database itself refuses a merchant of another project under a claimed slug.
 */

const BEFORE = 'Migration20261126000010SettledOrderFkDeferred';
const LONG = 'l'.repeat(60);

let orm: Orm;
let drop: () => Promise<void> = async () => undefined;
beforeAll(async () => {
  let target: DbTarget = { kind: 'pglite', dataDir: null, template: false };
  if (process.env.DATABASE_URL) ({ target, drop } = await createScratchDatabase(process.env.DATABASE_URL, 'svc_t', 2));
  orm = await openOrm(target, entities);
  await orm.migrator.up({ to: BEFORE });
});
afterAll(async () => {
  await orm?.close(true);
  await drop();
});

const q = (text: string, params: unknown[] = []) => orm.em.fork().execute(text, params) as Promise<Array<Record<string, any>>>;

const id = (n: number) => `mrch_${String(n).padStart(26, '0')}`;
/** A merchant row as the service wrote it before the migration (after it, with its domain token too). */
async function merchant(n: number, project: string, livemode: boolean, slug: string, createdAt: string, migrated = false) {
  await q(
    `insert into merchants (id, project_id, livemode, slug, name, domain, receiving, rails, receipt_kid, receipt_public_x, receipt_seed_sealed, created_at, updated_at${migrated ? ', domain_token' : ''})
     values (?, ?, ?, ?, 'Shop', 'shop.example.com', '{}', '["x402"]', 'kid', 'x', 'sealed', ?, ?${migrated ? `, 'token'` : ''})`,
    [id(n), project, livemode, slug, createdAt, createdAt],
  );
}
const bySlug = (rows: Array<Record<string, any>>) => [...rows].sort((a, b) => (String(a.slug) < String(b.slug) ? -1 : 1));

describe('migration MerchantClaims on conflicting data', () => {
  it('GIVEN a slug used by two projects (one per mode) WHEN the migration runs THEN the first-created merchant\'s project keeps it, the other is renamed to <slug>-<id>, and the database refuses a new cross-project use', async () => {
    await q(`insert into organizations (id, name) values ('org_a', 'A')`);
    for (const p of ['proj_a', 'proj_b', 'proj_c']) await q(`insert into projects (id, organization_id, name) values (?, 'org_a', ?)`, [p, p]);
    await merchant(1, 'proj_a', false, 'shared', '2026-01-01T00:00:00Z'); // A test, first: keeps "shared"
    await merchant(2, 'proj_b', true, 'shared', '2026-01-02T00:00:00Z'); // B live, later: renamed
    await merchant(3, 'proj_b', false, 'late', '2026-01-03T00:00:00Z'); // B test, first: keeps "late"
    await merchant(4, 'proj_a', true, 'late', '2026-01-04T00:00:00Z'); // A live, later: renamed
    await merchant(5, 'proj_c', false, 'own', '2026-01-05T00:00:00Z'); // one project in both modes: kept
    await merchant(6, 'proj_c', true, 'own', '2026-01-06T00:00:00Z');
    await merchant(7, 'proj_a', false, LONG, '2026-01-07T00:00:00Z');
    await merchant(8, 'proj_c', true, LONG, '2026-01-08T00:00:00Z'); // renamed within 63 characters

    await orm.migrator.up();

    const rows = await q('select id, project_id, slug, domain_token, verified_domain from merchants order by id');
    expect(rows.map((r) => [r.id, r.slug])).toEqual([
      [id(1), 'shared'],
      [id(2), `shared-${id(2).slice(5)}`],
      [id(3), 'late'],
      [id(4), `late-${id(4).slice(5)}`],
      [id(5), 'own'],
      [id(6), 'own'],
      [id(7), LONG],
      [id(8), `${LONG.slice(0, 36)}-${id(8).slice(5)}`],
    ]);
    for (const r of rows) {
      expect(r.slug).toMatch(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/);
      expect(r.domain_token).toMatch(/^[0-9a-f]{32}$/);
      expect(r.verified_domain).toBeNull();
    }
    expect(new Set(rows.map((r) => r.domain_token)).size).toBe(rows.length);
    const claims = await q('select slug, project_id from merchant_slugs');
    expect(bySlug(claims)).toEqual(
      bySlug([
        ['shared', 'proj_a'],
        [`shared-${id(2).slice(5)}`, 'proj_b'],
        ['late', 'proj_b'],
        [`late-${id(4).slice(5)}`, 'proj_a'],
        ['own', 'proj_c'],
        [LONG, 'proj_a'],
        [`${LONG.slice(0, 36)}-${id(8).slice(5)}`, 'proj_c'],
      ]
        .map(([slug, project_id]) => ({ slug, project_id })),
      ),
    );

    // The database, not only the service, keeps a slug in one project.
    await expect(merchant(9, 'proj_b', true, 'shared', '2026-02-01T00:00:00Z', true)).rejects.toThrow(/merchants_slug_claim/);
    // A verified domain must be the merchant's domain and claimed by its project.
    await expect(q(`update merchants set verified_domain = 'other.example.com', domain_verified_at = now() where id = ?`, [id(1)])).rejects.toThrow(/merchants_verified_domain_is_domain/);
    await expect(q(`update merchants set verified_domain = domain, domain_verified_at = now() where id = ?`, [id(1)])).rejects.toThrow(/merchants_domain_claim/);

    // A claim is released when no merchant of its project uses it any more.
    await q('delete from merchants where id = ?', [id(5)]);
    expect(await q(`select project_id from merchant_slugs where slug = 'own'`)).toEqual([{ project_id: 'proj_c' }]);
    await q('delete from merchants where id = ?', [id(6)]);
    expect(await q(`select project_id from merchant_slugs where slug = 'own'`)).toEqual([]);
    // Released, another project may claim it.
    await q(`insert into merchant_slugs (slug, project_id, created_at) values ('own', 'proj_b', now())`);
    await merchant(9, 'proj_b', false, 'own', '2026-02-02T00:00:00Z', true);
  });
});
