import type { Services } from '../../http/context.js';

/**
 * The admin CLI's command runner as the operator route sees it: `runCli` (src/cli.ts), passed in
 * by the app layer (routes.ts) so this module never imports an app file.
 */
export type RunCommand = (argv: string[], services: Services) => Promise<string>;

/** A command the CLI cannot run as given (exit 2 at the terminal, 400 VALIDATION_FAILED over the channel). */
export class UsageError extends Error {}
