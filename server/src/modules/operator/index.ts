/** The operator module's public API: the admin CLI's commands and the local channel the running server takes them on. */
export { OPERATOR_FILE, OperatorChannel, readOperatorFile, type OperatorFile } from './channel.js';
export { parseCommand, runCli, USAGE, UsageError, type CommandServices, type ParsedCommand } from './commands.js';
