import { createHash } from 'node:crypto';

type QueryFn = (config: unknown, values?: unknown, cb?: unknown) => unknown;
type PoolLike = { on(event: 'connect', listener: (client: { query: QueryFn }) => void): unknown };

/**
 * The named prepared statements of one ORM's `pg` pool (made with the ORM in db/orm.ts). On each
 * new connection of the pool, a query sent with values (only db/sql.ts `runSql` sends any;
 * MikroORM's own statements carry none) becomes a named prepared statement, parsed once per
 * connection. The set of texts is the fixed set of store statements, so the cache stays small.
 */
export class PreparedStatementNames {
  private readonly names = new Map<string, string>();

  /** The prepared statement's name: stable per text, so every connection of the pool shares it. */
  nameOf(text: string): string {
    let name = this.names.get(text);
    if (!name) {
      name = `svc_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      this.names.set(text, name);
    }
    return name;
  }

  install(pool: PoolLike): void {
    pool.on('connect', (client) => {
      const query = client.query.bind(client);
      client.query = (config, values, cb) =>
        typeof config === 'string' && Array.isArray(values) && values.length > 0 ? query({ name: this.nameOf(config), text: config, values }, cb) : query(config, values, cb);
    });
  }
}
