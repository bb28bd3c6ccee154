import { createLogger, loadConfigOrExit, runUntilSignal } from '@cq/service-kit';
import { loadWorkerConfig } from './config.js';
import { WorkerHost } from './worker-host.js';

const config = loadConfigOrExit(loadWorkerConfig);

const logger = createLogger({ level: config.logLevel, name: 'cq-worker' });
const host = new WorkerHost({ config, logger });
// Signals first: a SIGTERM that arrives while the host starts still stops it cleanly.
runUntilSignal(logger, () => host.stop());
await host.start();
