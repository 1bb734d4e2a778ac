import { Migration } from '@mikro-orm/migrations';

/**
 * Hardening 2: `webhook_attempts.sending_at` (set just before the request goes on the wire,
 * so a reclaimed lease records `lost` only for attempts that may have been sent), and live
 * merchants lose a trusted issuer JWKS URL that is not https (accepted before the outbound
 * URL rules; such a URL could only reach a private or loopback service).
 */
export class Migration20261123000020Hardening2 extends Migration {
  override name = 'Migration20261123000020Hardening2';

  override up(): void {
    this.addSql('alter table webhook_attempts add column sending_at timestamptz');
    this.addSql(`update merchants set trusted_svc_jwks_url = null where livemode and trusted_svc_jwks_url is not null and trusted_svc_jwks_url not like 'https://%'`);
  }

  override down(): void {
    this.addSql('alter table webhook_attempts drop column sending_at');
  }
}
