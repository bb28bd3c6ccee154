import { ConfigError } from './config.js';

/**
 * Parses the process's configuration with `load`; on a bad value writes its one-line message to
 * stderr and exits with code 1, as the contract asks of both processes.
 */
export function loadConfigOrExit<T>(load: (env: NodeJS.ProcessEnv) => T): T {
  try {
    return load(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
}
