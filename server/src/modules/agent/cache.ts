import type { EventSubscriber, TransactionEventArgs } from '@mikro-orm/core';
import type { Manifest, CatalogItem, RailName, Receiving } from '@svc/contract';
import type { Em, Orm } from '../../db/orm.js';
import { ChannelListener, type ListenerOptions } from '../../db/listener.js';
import type { Logger } from '../../lib/logger.js';

/**
 * What the agent read routes need of a merchant: a plain copy, never an ORM entity shared
 * across requests. Declared here rather than picked from the merchants module's row type, so
 * the cache (held by the services object, which every request context names) imports no
 * module; a merchant row is checked against it wherever one is remembered.
 */
export type MerchantSnapshot = {
  id: string;
  slug: string;
  name: string;
  domain: string;
  verifiedDomain?: string | null;
  livemode: boolean;
  rails: RailName[];
  receiving: Receiving;
  configVersion: number;
  receiptKid: string;
  receiptPublicX: string;
};

export type CachedManifest = { body: Manifest; etag: string };
export type CachedCatalog = { body: { items: CatalogItem[] } };

type Entry = { merchant: MerchantSnapshot; manifests: Map<string, CachedManifest>; catalog: CachedCatalog | null };

/** The channel the triggers of migration AgentConfigNotify notify on, with the merchant id as payload. */
export const AGENT_CONFIG_CHANNEL = 'svc_agent_config';

const MAX_MERCHANTS = 1000;
const MAX_REFS = 10_000;
/** Prefixes per merchant (`/m/<id>`, `/m/<slug>`, the hosts' ''; a slug's case variants are extra keys, so bound them). */
const MAX_PREFIXES = 8;

/**
 * A token from `begin()`: the invalidation epoch when a read-through started, or null when
 * nothing may be stored (the invalidation feed is down).
 */
export type CacheToken = number | null;

/**
 * The agent read path's in-process cache (held by the services: services.caches.agent):
 * merchant references (id, slug, host) to merchant ids, a plain snapshot of each published
 * merchant, its built manifests (one per path prefix) and its agent catalog. A warm GET of
 * the manifest or the catalog, and a 304, run no SQL.
 *
 * Invalidation, per merchant (and every reference, since a publish or a domain change can
 * move a slug or a host to another merchant):
 * - In this process, at commit: each write that changes what agents see calls
 *   `invalidateOnCommit(tx, merchantId)` inside its transaction, and the entry is dropped
 *   right after that transaction commits, before the write's response is sent.
 * - In every process on PostgreSQL: triggers on merchants, catalog_items and policy_versions
 *   NOTIFY `svc_agent_config` with the merchant id; PostgreSQL delivers it when the writing
 *   transaction commits (never for a rollback) to each process's listening session
 *   (db/listener.ts), which drops the entry. This also covers a write path that forgets to
 *   call invalidateOnCommit.
 * - While that session is down (not yet connected, lost, reconnecting) nothing is served
 *   from or stored in the cache: reads go to the database. When LISTEN is back everything
 *   is dropped, since notifications in between were missed.
 * - A read-through that raced an invalidation does not store its result: `begin()` takes
 *   the epoch before the first read, and `remember*` store only if no invalidation happened
 *   since (a result read before a commit and stored after its notification would otherwise
 *   stay stale).
 *
 * Staleness bound across processes: a process other than the writer may serve the previous
 * manifest or catalog after the write's commit for as long as the NOTIFY takes to reach it
 * (PostgreSQL signals the listening backends at commit; typically well under a millisecond,
 * more under CPU saturation), and never after its listener has received it. If the
 * listening connection dies silently, for up to `heartbeatMs` plus the statement timeout
 * (then the process reads through until it has listened again). In the writing process,
 * never: the entry is dropped before the write returns. On the embedded PGlite database
 * there is one process, and invalidation is the local one only.
 */
export class AgentReadCache {
  private readonly refs = new Map<string, string>();
  private readonly entries = new Map<string, Entry>();
  private readonly pending = new WeakMap<object, Set<string>>();
  private epoch = 0;
  private serving: boolean;
  private readonly listener: ChannelListener | null;

  /** `feed`: the PostgreSQL listener's options; null on PGlite (one process, local invalidation only). */
  constructor(orm: Orm, feed: Omit<ListenerOptions, 'channel'> | null, log: Logger) {
    this.listener = feed
      ? new ChannelListener(
          { ...feed, channel: AGENT_CONFIG_CHANNEL },
          {
            onNotify: (merchantId) => this.invalidate(merchantId),
            onUp: () => {
              this.clear();
              this.serving = true;
            },
            onDown: () => {
              this.serving = false;
              this.clear();
            },
          },
          log,
        )
      : null;
    this.serving = !feed;
    const subscriber: EventSubscriber = {
      afterTransactionCommit: (args: TransactionEventArgs) => {
        const ids = args.transaction ? this.pending.get(args.transaction) : undefined;
        if (!ids) return;
        this.pending.delete(args.transaction!);
        for (const id of ids) this.invalidate(id);
      },
    };
    orm.em.getEventManager().registerSubscriber(subscriber);
  }

  /** True when the cache may serve (PGlite, or the listener is up); starts the listener on first use. */
  get active(): boolean {
    if (!this.serving && this.listener) this.listener.start();
    return this.serving;
  }

  /** Stops the listener (the ORM's close calls this). */
  async close(): Promise<void> {
    await this.listener?.stop();
  }

  // --- reads -------------------------------------------------------------------------------

  /** The merchant a reference names (`refKey`), if cached. */
  merchant(refKey: string): MerchantSnapshot | undefined {
    return this.entry(refKey)?.merchant;
  }

  manifest(refKey: string, prefix: string): CachedManifest | undefined {
    return this.entry(refKey)?.manifests.get(prefix);
  }

  catalog(refKey: string): CachedCatalog | undefined {
    return this.entry(refKey)?.catalog ?? undefined;
  }

  private entry(refKey: string): Entry | undefined {
    if (!this.active) return undefined;
    const id = this.refs.get(refKey);
    return id === undefined ? undefined : this.entries.get(id);
  }

  // --- read-through stores -----------------------------------------------------------------

  /** Call before the first database read of a read-through; pass the token to remember*. */
  begin(): CacheToken {
    return this.active ? this.epoch : null;
  }

  private fresh(token: CacheToken): boolean {
    return token !== null && token === this.epoch && this.serving;
  }

  /** Records that `refKey` names this merchant; returns its entry (null when not stored). */
  rememberMerchant(token: CacheToken, refKey: string, m: MerchantSnapshot): Entry | null {
    if (!this.fresh(token)) return null;
    let entry = this.entries.get(m.id);
    if (!entry || entry.merchant.configVersion !== m.configVersion) {
      entry = { merchant: snapshotOf(m), manifests: new Map(), catalog: null };
      this.entries.set(m.id, entry);
      if (this.entries.size > MAX_MERCHANTS) this.evictMerchant(this.entries.keys().next().value!);
    }
    if (this.refs.get(refKey) !== m.id) {
      this.refs.set(refKey, m.id);
      if (this.refs.size > MAX_REFS) this.refs.delete(this.refs.keys().next().value!);
    }
    return entry;
  }

  rememberManifest(token: CacheToken, refKey: string, m: MerchantSnapshot, prefix: string, doc: CachedManifest): void {
    const entry = this.rememberMerchant(token, refKey, m);
    if (!entry) return;
    entry.manifests.set(prefix, doc);
    if (entry.manifests.size > MAX_PREFIXES) entry.manifests.delete(entry.manifests.keys().next().value!);
  }

  rememberCatalog(token: CacheToken, refKey: string, m: MerchantSnapshot, doc: CachedCatalog): void {
    const entry = this.rememberMerchant(token, refKey, m);
    if (entry) entry.catalog = doc;
  }

  /** A host (the merchant's own domain) routed to a merchant id. */
  merchantIdForHost(host: string): string | undefined {
    return this.active ? this.refs.get(hostKey(host)) : undefined;
  }

  rememberHost(token: CacheToken, host: string, merchantId: string): void {
    if (!this.fresh(token)) return;
    this.refs.set(hostKey(host), merchantId);
    if (this.refs.size > MAX_REFS) this.refs.delete(this.refs.keys().next().value!);
  }

  // --- invalidation ------------------------------------------------------------------------

  /**
   * Inside a write's transaction: drop the merchant's entry when that transaction commits
   * (nothing happens on rollback). Outside a transaction the entry is dropped at once. Pass
   * the top-level transaction's em: a savepoint's release is not the commit.
   */
  invalidateOnCommit(tx: Em, merchantId: string): void {
    const trx = tx.getTransactionContext<object>();
    if (!trx) {
      this.invalidate(merchantId);
      return;
    }
    let ids = this.pending.get(trx);
    if (!ids) this.pending.set(trx, (ids = new Set()));
    ids.add(merchantId);
  }

  /** A read that loaded the merchant row saw `configVersion`: an older cached entry is dropped. */
  sawConfigVersion(merchantId: string, configVersion: number): void {
    const entry = this.entries.get(merchantId);
    if (entry && entry.merchant.configVersion < configVersion) this.invalidate(merchantId);
  }

  /** Drops one merchant and every reference (a slug or host may now name another merchant). */
  invalidate(merchantId: string): void {
    this.epoch += 1;
    this.entries.delete(merchantId);
    this.refs.clear();
  }

  private clear(): void {
    this.epoch += 1;
    this.entries.clear();
    this.refs.clear();
  }

  private evictMerchant(id: string): void {
    this.entries.delete(id);
    for (const [k, v] of this.refs) if (v === id) this.refs.delete(k);
  }

  /** For tests and metrics: the listener is up (always true on PGlite). */
  get listening(): boolean {
    return this.listener ? this.listener.listening : true;
  }
}

function snapshotOf(m: MerchantSnapshot): MerchantSnapshot {
  return {
    id: m.id,
    slug: m.slug,
    name: m.name,
    domain: m.domain,
    verifiedDomain: m.verifiedDomain,
    livemode: m.livemode,
    rails: [...m.rails],
    receiving: structuredClone(m.receiving),
    configVersion: m.configVersion,
    receiptKid: m.receiptKid,
    receiptPublicX: m.receiptPublicX,
  };
}

/** The cache key of an `/m/<ref>` reference: ids as they are, slugs lower-cased (see merchantByRef). */
export function refKeyOf(ref: string, isId: boolean): string {
  return isId ? ref : `slug:${ref.toLowerCase()}`;
}

function hostKey(host: string): string {
  return `host:${host.toLowerCase()}`;
}
