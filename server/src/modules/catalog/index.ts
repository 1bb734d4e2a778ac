/** The catalog module's public API: a merchant's items (what other modules may call). */
export { presentCatalogItem } from './service.js';
export { findCatalogItem, listCatalogItems, type CatalogRow } from './store.js';
