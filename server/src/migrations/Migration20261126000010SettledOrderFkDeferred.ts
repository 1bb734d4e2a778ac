import { Migration } from '@mikro-orm/migrations';

/**
 * An accepted order's link to its settled attempt (orders_settlement_attempt_fk on
 * (settlement_attempt_id, settlement_status) -> settlement_attempts (id, status)) is checked at
 * commit instead of per statement. The rule is unchanged (an order exists only beside a settled
 * attempt, and that attempt cannot leave `settled` while the order points at it); phase 3 can
 * write the attempt's `settled` and the order in one flush, whatever order the statements take.
 */
export class Migration20261126000010SettledOrderFkDeferred extends Migration {
  override name = 'Migration20261126000010SettledOrderFkDeferred';

  override up(): void {
    this.addSql('alter table orders alter constraint orders_settlement_attempt_fk deferrable initially deferred');
  }

  override down(): void {
    this.addSql('alter table orders alter constraint orders_settlement_attempt_fk not deferrable');
  }
}
