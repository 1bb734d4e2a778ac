import { ensureDashboardBuilt } from '../../scripts/build-dashboard.js';

/** The browser tests load the built dashboard: build it once per run when its inputs changed. */
export default async function setup() {
  await ensureDashboardBuilt();
}
