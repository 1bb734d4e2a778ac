import { createServices } from './boot.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { DataDirInUseError } from './db/orm.js';
import type { Services } from './services.js';
import { applyHeapGrowth } from './lib/heap.js';

function exitOnKnown(err: unknown): never {
  if (err instanceof ConfigError || err instanceof DataDirInUseError) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  throw err;
}

/**
 * Shared by the server and the worker: a bad variable stops the process with one line naming
 * it. The process-wide settings the configuration names (the heap's growth) are applied here,
 * first thing in every process's main, the cluster's servers included.
 */
export function loadConfigOrExit(): Config {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    return exitOnKnown(err);
  }
  applyHeapGrowth(config.SVC_HEAP_GROWTH_PERCENT);
  return config;
}

/** Opens the database and runs migrations; a busy PGlite data directory is one line too. */
export async function startServicesOrExit(config: Config, opts: Parameters<typeof createServices>[1] = {}): Promise<Services> {
  try {
    return await createServices(config, opts);
  } catch (err) {
    return exitOnKnown(err);
  }
}
