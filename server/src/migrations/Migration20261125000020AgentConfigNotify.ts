import { Migration } from '@mikro-orm/migrations';

/**
 * Every change to what agents read of a merchant (its row, its catalog, its policy versions)
 * notifies `svc_agent_config` with the merchant id. PostgreSQL delivers a NOTIFY when the
 * writing transaction commits, to every session listening: each server process keeps one
 * (modules/agent/cache.ts) and drops that merchant from its in-process cache. As triggers,
 * no write path can forget it, raw SQL and future code included. Identical payloads in one
 * transaction are delivered once.
 */
export class Migration20261125000020AgentConfigNotify extends Migration {
  override name = 'Migration20261125000020AgentConfigNotify';

  override up(): void {
    this.addSql(`create function svc_notify_merchant_config() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_agent_config', coalesce(new.id, old.id));
  return null;
end $$`);
    this.addSql(`create function svc_notify_merchant_child_config() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_agent_config', coalesce(new.merchant_id, old.merchant_id));
  return null;
end $$`);
    this.addSql(`create trigger merchants_agent_config after insert or delete on merchants for each row execute function svc_notify_merchant_config()`);
    this.addSql(
      `create trigger merchants_agent_config_update after update on merchants for each row when (old.* is distinct from new.*) execute function svc_notify_merchant_config()`,
    );
    this.addSql(`create trigger catalog_items_agent_config after insert or update or delete on catalog_items for each row execute function svc_notify_merchant_child_config()`);
    this.addSql(`create trigger policy_versions_agent_config after insert or update or delete on policy_versions for each row execute function svc_notify_merchant_child_config()`);
  }

  override down(): void {
    this.addSql('drop trigger policy_versions_agent_config on policy_versions');
    this.addSql('drop trigger catalog_items_agent_config on catalog_items');
    this.addSql('drop trigger merchants_agent_config_update on merchants');
    this.addSql('drop trigger merchants_agent_config on merchants');
    this.addSql('drop function svc_notify_merchant_child_config()');
    this.addSql('drop function svc_notify_merchant_config()');
  }
}
