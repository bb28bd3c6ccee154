import { ConfigError, createLogger, runUntilSignal } from '@cq/service-kit';
import { loadWorkerConfig, type WorkerConfig } from './config.js';
import { WorkerHost } from './worker-host.js';

let config: WorkerConfig;
try {
  config = loadWorkerConfig(process.env);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}

const logger = createLogger({ level: config.logLevel, name: 'cq-worker' });
const host = new WorkerHost({ config, logger });
// Signals first: a SIGTERM that arrives while the host starts still stops it cleanly.
runUntilSignal(logger, () => host.stop());
await host.start();
