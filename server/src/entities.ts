import type { OrmEntities } from './db/orm.js';
import { ApiKey, Organization, Project } from './modules/accounts/entity.js';
import { CatalogItemEntity } from './modules/catalog/entity.js';
import { MerchantEntity } from './modules/merchants/entity.js';
import { PolicyVersionEntity } from './modules/policy/entity.js';
import { CheckoutSessionEntity } from './modules/checkout/entity.js';
import { OrderEntity, ReceiptEntity } from './modules/orders/entity.js';
import { WebhookEndpointEntity } from './modules/webhooks/entity.js';
import { RefundEntity, RefundTransactionEntity, SettlementAttemptEntity, SettlementTransactionEntity } from './modules/settlement/entity.js';
import { DeviceCode, Membership, SignInToken, User, UserSession } from './modules/auth/entity.js';

/**
 * Every MikroORM entity of the service, assembled here in the app layer (each is declared in its
 * module's entity.ts) and handed to `openOrm` (db/orm.ts), which imports no module.
 */
export const entities: OrmEntities = [Organization, Project, ApiKey, MerchantEntity, CatalogItemEntity, PolicyVersionEntity, CheckoutSessionEntity, OrderEntity, ReceiptEntity, WebhookEndpointEntity, SettlementAttemptEntity, SettlementTransactionEntity, RefundEntity, RefundTransactionEntity, User, Membership, DeviceCode, SignInToken, UserSession];
