import { ConfigError, createLogger, loadConfigOrExit, runUntilSignal } from '@cq/service-kit';
import { loadWorkerConfig } from './config.js';
import { WorkerHost } from './worker-host.js';

const config = loadConfigOrExit(loadWorkerConfig);

const logger = createLogger({ level: config.logLevel, name: 'cq-worker' });
const host = new WorkerHost({ config, logger });
// Signals first: a SIGTERM that arrives while the host starts still stops it cleanly.
const stop = runUntilSignal(logger, () => host.stop());
// SIGTSTP drains, as Sidekiq's TSTP quiets a process: no new sessions, the running ones end on their own;
// then the host exits 0 (a drain asked through the API ends the same way). SIGTERM still stops at any time.
process.on('SIGTSTP', () => void host.drain('SIGTSTP'));
void host.drained.then(() => stop('drained'));
try {
  await host.start();
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`${err.message}\n`);
  await host.stop();
  process.exit(1);
}
