import { ApiKey, Organization, Project } from '../modules/accounts/entity.js';
import { CatalogItemEntity } from '../modules/catalog/entity.js';
import { MerchantEntity } from '../modules/merchants/entity.js';
import { PolicyVersionEntity } from '../modules/policy/entity.js';
import { CheckoutSessionEntity } from '../modules/checkout/entity.js';
import { OrderEntity, ReceiptEntity } from '../modules/orders/entity.js';
import { WebhookEndpointEntity } from '../modules/webhooks/entity.js';
import { SettlementAttemptEntity, SettlementTransactionEntity } from '../modules/settlement/entity.js';
import { DeviceCode, Membership, SignInToken, User, UserSession } from '../modules/auth/entity.js';

export const entities = [Organization, Project, ApiKey, MerchantEntity, CatalogItemEntity, PolicyVersionEntity, CheckoutSessionEntity, OrderEntity, ReceiptEntity, WebhookEndpointEntity, SettlementAttemptEntity, SettlementTransactionEntity, User, Membership, DeviceCode, SignInToken, UserSession];
