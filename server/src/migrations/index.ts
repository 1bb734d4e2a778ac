import { Migration20261121000001Foundation } from './Migration20261121000001Foundation.js';
import { Migration20261121000002AgentProtocol } from './Migration20261121000002AgentProtocol.js';
import { Migration20261121000003Webhooks } from './Migration20261121000003Webhooks.js';
import { Migration20261121000004Ingest } from './Migration20261121000004Ingest.js';
import { Migration20261123000001Settlement } from './Migration20261123000001Settlement.js';
import { Migration20261123000020Hardening2 } from './Migration20261123000020Hardening2.js';

/** Every migration in order; listed explicitly so bundling or tsx never depends on a glob. */
export const migrationsList = [
  { name: 'Migration20261121000001Foundation', class: Migration20261121000001Foundation },
  { name: 'Migration20261121000002AgentProtocol', class: Migration20261121000002AgentProtocol },
  { name: 'Migration20261121000003Webhooks', class: Migration20261121000003Webhooks },
  { name: 'Migration20261121000004Ingest', class: Migration20261121000004Ingest },
  { name: 'Migration20261123000001Settlement', class: Migration20261123000001Settlement },
  { name: 'Migration20261123000020Hardening2', class: Migration20261123000020Hardening2 },
];
