import { Migration } from '@mikro-orm/migrations';

/**
 * Indexes for the dashboard's reads: the order summary's days (orders by creation time), the
 * events of one order (`data.object.id`), held sessions awaiting review, and each endpoint's
 * latest attempt and failed deliveries (the summary's failing endpoints).
 */
export class Migration20261124000010DashboardApi extends Migration {
  override name = 'Migration20261124000010DashboardApi';

  override up(): void {
    this.addSql('create index orders_created on orders (project_id, livemode, created_at)');
    this.addSql(`create index events_object on events (project_id, livemode, (payload #>> '{data,object,id}'), seq desc)`);
    this.addSql(`create index checkout_sessions_held on checkout_sessions (merchant_id) where state = 'held'`);
    this.addSql('create index webhook_attempts_endpoint_latest on webhook_attempts (endpoint_id, created_at desc, id desc)');
    this.addSql(`create index webhook_deliveries_endpoint_failed on webhook_deliveries (endpoint_id) where status = 'failed'`);
  }

  override down(): void {
    this.addSql('drop index webhook_deliveries_endpoint_failed');
    this.addSql('drop index webhook_attempts_endpoint_latest');
    this.addSql('drop index checkout_sessions_held');
    this.addSql('drop index events_object');
    this.addSql('drop index orders_created');
  }
}
