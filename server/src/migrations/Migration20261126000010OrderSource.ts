import { Migration } from '@mikro-orm/migrations';

/**
 * Where an order came from, as a rule of the table (docs/decisions.md, "Ingested orders say so").
 * `orders.source` has been written since the first ingest route: `hosted` by the settle path,
 * `ingest` by `/v1/ingest/*`. The structural test is the checkout session: a hosted order always
 * has one, an ingested one never does (ingest refuses a hosted session's id), so any order
 * without one is set to `ingest` (a no-op on rows the routes wrote). The default goes: every
 * insert names its source, so none can become `hosted` by omission. An ingested order never
 * points at a settlement attempt (only the service's own settlements have one).
 *
 * Stored order events gain the same `source` in `data.object`, so the events API and a replay
 * rebuilt from the payload show it; bytes already frozen for delivery are left as they were sent.
 */
export class Migration20261126000010OrderSource extends Migration {
  override name = 'Migration20261126000010OrderSource';

  override up(): void {
    this.addSql(`update orders o set source = 'ingest'
      where o.source <> 'ingest' and not exists (select 1 from checkout_sessions s where s.id = o.session_id)`);
    this.addSql(`alter table orders alter column source drop default,
      add constraint orders_source check (source in ('hosted', 'ingest')),
      add constraint orders_ingest_unsettled check (source = 'hosted' or settlement_attempt_id is null)`);
    this.addSql(`update events e set payload = jsonb_set(e.payload, '{data,object,source}', to_jsonb(o.source))
      from orders o
      where e.type like 'order.%' and o.id = e.payload #>> '{data,object,id}'`);
  }
}
