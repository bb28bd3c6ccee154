import { ConfigError, createLogger, loadConfigOrExit, runUntilSignal } from '@cq/service-kit';
import { loadWorkerConfig } from './config.js';
import { probeContainment } from './containment.js';
import { containmentRequest } from './session-setup.js';
import { WorkerHost } from './worker-host.js';

const config = loadConfigOrExit(loadWorkerConfig);
// What this host can do to contain its sessions, found out once (changing nothing): what it cannot do
// that the configuration asks for stops it here, with one line naming what is missing. The caps' cgroups
// are made by host.start(), which stops the host the same way where they cannot be enforced.
const containment = loadConfigOrExit(() => probeContainment(containmentRequest(config)));

const logger = createLogger({ level: config.logLevel, name: 'cq-worker' });
const host = new WorkerHost({ config, logger, containment });
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
