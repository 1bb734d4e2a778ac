/** The accounts module's public API: organizations, projects and API keys (what other modules and the app layer may call). */
export { Organization } from './entity.js';
export { authenticate, createApiKey, createProject, getProject, KEY_PREFIX, listApiKeys, listProjects, revokeApiKey } from './service.js';
export { DEFAULT_ROLL_GRACE_SECONDS, presentKey } from './keys.js';
export {
  addOrganizationWithProject,
  findDefaultProject,
  findKeyByIdOrFail,
  findProject,
  findProjectOrFail,
  firstProjectOfOrganization,
  listProjectsOfOrganizations,
  lockProjectForInserts,
  markProjectDefault,
  type KeyRow,
  type NewProject,
  type ProjectRow,
} from './store.js';
