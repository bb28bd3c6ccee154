/** A bounded call that got no answer in time: `<what> timed out after <ms> ms`. */
export class TimeoutError extends Error {
  override name = 'TimeoutError';
  /** Node's code for a timed-out operation, so it sorts with the network timeouts. */
  readonly code = 'ETIMEDOUT';

  constructor(what: string, ms: number) {
    super(`${what} timed out after ${ms} ms`);
  }
}

/**
 * `promise`, or a rejection with {@link TimeoutError} (`<what> timed out after <ms> ms`) once `ms` have
 * passed. The promise goes on; its later failure is ignored here (the caller has already been answered).
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  promise.catch(() => {});
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
