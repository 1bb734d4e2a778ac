import { describe, expect, it } from 'vitest';
import type { Orm } from '../../src/db/orm.js';
import type { Logger } from '../../src/lib/logger.js';
import { AgentReadCache, type MerchantSnapshot } from '../../src/modules/agent/cache.js';

/** The cache only registers a commit subscriber on the ORM; these tests drive it directly. */
function cache() {
  const subscribers: Array<{ afterTransactionCommit?: (args: { transaction?: object }) => void }> = [];
  const orm = { em: { getEventManager: () => ({ registerSubscriber: (s: any) => subscribers.push(s) }) } } as unknown as Orm;
  const c = new AgentReadCache(orm, null, {} as Logger);
  const commit = (transaction: object) => subscribers.forEach((s) => s.afterTransactionCommit?.({ transaction }));
  return { c, commit };
}

const merchant = (configVersion = 1): MerchantSnapshot =>
  ({ id: 'mrch_1', slug: 'shop', name: 'Shop', domain: 'shop.example', livemode: false, rails: ['x402'], receiving: {}, configVersion, receiptKid: 'k', receiptPublicX: 'x' }) as MerchantSnapshot;
const doc = (tag: string) => ({ body: { tag } as any, etag: `"${tag}"` });

describe('AgentReadCache', () => {
  it('GIVEN a read-through that began before an invalidation WHEN it stores its result THEN nothing is stored (it may hold the pre-commit state)', () => {
    const { c } = cache();
    const token = c.begin();
    c.invalidate('mrch_1');
    c.rememberManifest(token, 'mrch_1', merchant(), '/m/mrch_1', doc('old'));
    expect(c.manifest('mrch_1', '/m/mrch_1')).toBeUndefined();
    const later = c.begin();
    c.rememberManifest(later, 'mrch_1', merchant(2), '/m/mrch_1', doc('new'));
    expect(c.manifest('mrch_1', '/m/mrch_1')?.etag).toBe('"new"');
  });

  it('GIVEN a write marked in a transaction WHEN that transaction commits THEN the entry is dropped then, not before, and never for another transaction', () => {
    const { c, commit } = cache();
    c.rememberManifest(c.begin(), 'mrch_1', merchant(), '', doc('a'));
    const trx = {};
    const tx = { getTransactionContext: () => trx } as any;
    c.invalidateOnCommit(tx, 'mrch_1');
    expect(c.manifest('mrch_1', '')).toBeDefined();
    commit({});
    expect(c.manifest('mrch_1', '')).toBeDefined();
    commit(trx);
    expect(c.manifest('mrch_1', '')).toBeUndefined();
  });

  it('GIVEN a slug and a host cached WHEN any merchant is invalidated THEN every reference is dropped (a slug or host may now name another merchant)', () => {
    const { c } = cache();
    c.rememberManifest(c.begin(), 'slug:shop', merchant(), '', doc('a'));
    c.rememberHost(c.begin(), 'Shop.Example', 'mrch_1');
    expect(c.merchantIdForHost('shop.example')).toBe('mrch_1');
    c.invalidate('mrch_other');
    expect(c.manifest('slug:shop', '')).toBeUndefined();
    expect(c.merchantIdForHost('shop.example')).toBeUndefined();
  });

  it('GIVEN a write path that read a newer config_version WHEN it reports it THEN the older entry is dropped; the same version keeps it', () => {
    const { c } = cache();
    c.rememberCatalog(c.begin(), 'mrch_1', merchant(3), { body: { items: [] } });
    c.sawConfigVersion('mrch_1', 3);
    expect(c.catalog('mrch_1')).toBeDefined();
    c.sawConfigVersion('mrch_1', 4);
    expect(c.catalog('mrch_1')).toBeUndefined();
  });

  it('GIVEN many merchants and many prefixes WHEN they are cached THEN the cache stays bounded', () => {
    const { c } = cache();
    for (let i = 0; i < 1500; i++) c.rememberManifest(c.begin(), `mrch_${i}`, { ...merchant(), id: `mrch_${i}` }, '', doc(String(i)));
    expect(c.manifest('mrch_0', '')).toBeUndefined();
    expect(c.manifest('mrch_1499', '')).toBeDefined();
    for (let i = 0; i < 20; i++) c.rememberManifest(c.begin(), 'mrch_1499', { ...merchant(), id: 'mrch_1499' }, `/m/SHOP${i}`, doc(String(i)));
    expect(c.manifest('mrch_1499', '/m/SHOP0')).toBeUndefined();
    expect(c.manifest('mrch_1499', '/m/SHOP19')).toBeDefined();
  });
});
