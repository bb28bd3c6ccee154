import type { Logger } from 'pino';

/**
 * Calls `stop` once on the first SIGTERM or SIGINT, then exits 0 (1 if stopping failed). A second
 * signal while stopping is logged and ignored: the stop is already bounded by its own timeouts.
 * Returns the same trigger, for a process that decides to stop by itself (a worker host that drained).
 */
export function runUntilSignal(
  logger: Logger,
  stop: (signal: NodeJS.Signals | 'drained') => Promise<void>,
): (reason: 'drained') => void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals | 'drained'): void => {
    if (stopping) {
      logger.warn({ signal }, 'already stopping');
      return;
    }
    stopping = true;
    logger.info({ signal }, 'stopping');
    stop(signal).then(
      () => {
        logger.info('stopped');
        logger.flush?.();
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'stop failed');
        logger.flush?.();
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return onSignal;
}
