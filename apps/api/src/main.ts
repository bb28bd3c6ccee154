import { ConfigError, createLogger, listenError, loadConfigOrExit, runUntilSignal } from '@cq/service-kit';
import { buildApp } from './app.js';
import { loadApiConfig } from './config.js';

const config = loadConfigOrExit(loadApiConfig);

const logger = createLogger({ level: config.logLevel, name: 'cq-api' });
const app = await buildApp({ config, logger });
// Signals first: a SIGTERM that arrives while the API starts still stops it cleanly.
runUntilSignal(logger, () => app.close());
try {
  await app.listen({ host: config.host, port: config.port });
} catch (err) {
  // Redis refused the credentials, or is set up to lose writes, or the address is taken: one line, as
  // for a bad variable.
  const line = err instanceof ConfigError ? err : listenError('PORT and HOST', config.host, config.port, err);
  if (line !== undefined) process.stderr.write(`${line.message}\n`);
  else logger.fatal({ err }, 'could not listen');
  process.exit(1);
}
