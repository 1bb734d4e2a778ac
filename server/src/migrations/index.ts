import { Migration20261121000001Foundation } from './Migration20261121000001Foundation.js';

/** Every migration in order; listed explicitly so bundling or tsx never depends on a glob. */
export const migrationsList = [{ name: 'Migration20261121000001Foundation', class: Migration20261121000001Foundation }];
