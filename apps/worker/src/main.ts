import { ConfigError, createLogger, loadConfigOrExit, runUntilSignal } from '@cq/service-kit';
import { loadWorkerConfig } from './config.js';
import { WorkerHost } from './worker-host.js';

const config = loadConfigOrExit(loadWorkerConfig);

const logger = createLogger({ level: config.logLevel, name: 'cq-worker' });
const host = new WorkerHost({ config, logger });
// Signals first: a SIGTERM that arrives while the host starts still stops it cleanly.
runUntilSignal(logger, () => host.stop());
try {
  await host.start();
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`${err.message}\n`);
  await host.stop();
  process.exit(1);
}
