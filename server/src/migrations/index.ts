import { Migration20261121000001Foundation } from './Migration20261121000001Foundation.js';
import { Migration20261121000002AgentProtocol } from './Migration20261121000002AgentProtocol.js';
import { Migration20261121000003Webhooks } from './Migration20261121000003Webhooks.js';
import { Migration20261121000004Ingest } from './Migration20261121000004Ingest.js';
import { Migration20261123000001Settlement } from './Migration20261123000001Settlement.js';
import { Migration20261123000010Hardening1 } from './Migration20261123000010Hardening1.js';
import { Migration20261123000020Hardening2 } from './Migration20261123000020Hardening2.js';
import { Migration20261123000040Keys } from './Migration20261123000040Keys.js';
import { Migration20261123000050Accounts } from './Migration20261123000050Accounts.js';
import { Migration20261124000010DashboardApi } from './Migration20261124000010DashboardApi.js';
import { Migration20261125000020AgentConfigNotify } from './Migration20261125000020AgentConfigNotify.js';
import { Migration20261126000010SettledOrderFkDeferred } from './Migration20261126000010SettledOrderFkDeferred.js';
import { Migration20261126000010ReputationByMode } from './Migration20261126000010ReputationByMode.js';
import { Migration20261126000010OrderSource } from './Migration20261126000010OrderSource.js';
import { Migration20261126000020MerchantClaims } from './Migration20261126000020MerchantClaims.js';
import { Migration20261126000030Refunds } from './Migration20261126000030Refunds.js';
import { Migration20261126000031HotPath } from './Migration20261126000031HotPath.js';
import { Migration20261126000032MerchantReputationEvents } from './Migration20261126000032MerchantReputationEvents.js';
import { Migration20261127000041Ap2Issuers } from './Migration20261127000041Ap2Issuers.js';
import { Migration20261127000042Projects } from './Migration20261127000042Projects.js';

/** Every migration in order; listed explicitly so bundling or tsx never depends on a glob. */
export const migrationsList = [
  { name: 'Migration20261121000001Foundation', class: Migration20261121000001Foundation },
  { name: 'Migration20261121000002AgentProtocol', class: Migration20261121000002AgentProtocol },
  { name: 'Migration20261121000003Webhooks', class: Migration20261121000003Webhooks },
  { name: 'Migration20261121000004Ingest', class: Migration20261121000004Ingest },
  { name: 'Migration20261123000001Settlement', class: Migration20261123000001Settlement },
  { name: 'Migration20261123000010Hardening1', class: Migration20261123000010Hardening1 },
  { name: 'Migration20261123000020Hardening2', class: Migration20261123000020Hardening2 },
  { name: 'Migration20261123000040Keys', class: Migration20261123000040Keys },
  { name: 'Migration20261123000050Accounts', class: Migration20261123000050Accounts },
  { name: 'Migration20261124000010DashboardApi', class: Migration20261124000010DashboardApi },
  { name: 'Migration20261125000020AgentConfigNotify', class: Migration20261125000020AgentConfigNotify },
  { name: 'Migration20261126000010SettledOrderFkDeferred', class: Migration20261126000010SettledOrderFkDeferred },
  { name: 'Migration20261126000010ReputationByMode', class: Migration20261126000010ReputationByMode },
  { name: 'Migration20261126000010OrderSource', class: Migration20261126000010OrderSource },
  { name: 'Migration20261126000020MerchantClaims', class: Migration20261126000020MerchantClaims },
  { name: 'Migration20261126000030Refunds', class: Migration20261126000030Refunds },
  { name: 'Migration20261126000031HotPath', class: Migration20261126000031HotPath },
  { name: 'Migration20261126000032MerchantReputationEvents', class: Migration20261126000032MerchantReputationEvents },
  { name: 'Migration20261127000041Ap2Issuers', class: Migration20261127000041Ap2Issuers },
  { name: 'Migration20261127000042Projects', class: Migration20261127000042Projects },
];
