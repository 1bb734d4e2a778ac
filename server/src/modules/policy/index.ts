/** The policy module's public API: a merchant's policy versions and what a publish checks (what other modules may call). */
export { activePolicy, policyHash, railSettles, validateDraft } from './service.js';
export { type PolicyVersionRow } from './store.js';
