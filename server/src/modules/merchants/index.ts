/** The merchants module's public API: merchants, their receiving config and domain proof (what other modules and the app layer may call). */
export {
  bumpConfigVersion,
  domainVerified,
  findMerchant,
  getReceiving,
  receivingBalance,
  lockMerchantRow,
  presentMerchant,
  publicJwk,
  putReceiving,
  receiptKidFor,
  resolveMerchant,
} from './service.js';
export { checkReceiving, effectiveRails, TOKEN_REGISTRY, type ReceivingFinding } from './receiving.js';
export { defaultDomainProofIo, type DomainProofIo } from './domain.js';
export {
  findMerchantById,
  findMerchantByIdOrFail,
  findProjectMerchant,
  findPublishedMerchantBySlug,
  findPublishedMerchantIdByDomain,
  incrementConfigVersion,
  loadMerchantById,
  lockMerchantForUpdate,
  markMerchantPublished,
  merchantRowById,
  settleMerchantOf,
  SETTLE_MERCHANT_COLUMNS,
  type MerchantRow,
  type SettleMerchant,
} from './store.js';
