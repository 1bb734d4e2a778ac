import { ensureDashboardBuilt } from '../../scripts/build-dashboard.js';
import { ensurePgliteTemplate } from '../../scripts/pglite-template.js';

/**
 * The browser tests load the built dashboard: build it once per run when its inputs changed.
 * Every embedded test database unpacks from the PGlite template: make it when `npm ci` did
 * not (a new migration, or an install without scripts).
 */
export default async function setup() {
  await Promise.all([ensureDashboardBuilt(), ensurePgliteTemplate()]);
}
