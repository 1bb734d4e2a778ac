import { Migration20261121000001Foundation } from './Migration20261121000001Foundation.js';
import { Migration20261121000002AgentProtocol } from './Migration20261121000002AgentProtocol.js';

/** Every migration in order; listed explicitly so bundling or tsx never depends on a glob. */
export const migrationsList = [
  { name: 'Migration20261121000001Foundation', class: Migration20261121000001Foundation },
  { name: 'Migration20261121000002AgentProtocol', class: Migration20261121000002AgentProtocol },
];
