import { settleBounded } from '../fan-out.js';
import type { SessionStore } from '../sessions.js';
import type { WorkerRegistry } from '../workers.js';
import type { SweepResult } from './types.js';

/**
 * The id of the host whose lease `token` is: a host lease's token is `<workerId>/<unique>` (see
 * `HostLeaseBeat.token`), and a host id has no '/'. Undefined for a token of another shape: its
 * sessions are then swept without the host check.
 */
function hostOfLeaseToken(token: string): string | undefined {
  const at = token.indexOf('/');
  return at > 0 ? token.slice(0, at) : undefined;
}

/** What the host-lease sweep is given. */
export interface HostLeaseSweepOptions {
  /** Sessions ended at once. */
  readonly concurrency: number;
  /** True once the sweeper is stopping: no more scripts are started. */
  readonly stopping: () => boolean;
  /** Called after each lease whose sessions it ended. */
  readonly onSwept?: ((result: SweepResult) => void) | undefined;
}

/**
 * Ends, as `lost`, the sessions registered under host leases that ran out (their hosts stopped them by
 * then) that those hosts claimed, then forgets those leases.
 */
export class HostLeaseSweep {
  readonly #workers: WorkerRegistry;
  readonly #sessions: SessionStore;
  readonly #options: HostLeaseSweepOptions;

  constructor(workers: WorkerRegistry, sessions: SessionStore, options: HostLeaseSweepOptions) {
    this.#workers = workers;
    this.#sessions = sessions;
    this.#options = options;
  }

  /** One look at the host leases that ran out; answers how many sessions it ended. */
  async sweep(): Promise<number> {
    const { concurrency, stopping, onSwept } = this.#options;
    let lost = 0;
    for (const token of await this.#workers.expiredLeases()) {
      if (stopping()) break;
      const registered = Object.entries(await this.#workers.leaseSessions(token));
      // Only the lease's own host's sessions: one claimed by another host (a session id claimed twice,
      // or a registration of something the host never ran) is that host's to end.
      const workerId = hostOfLeaseToken(token);
      const outcomes = await settleBounded(registered, concurrency, stopping, ([sessionId, userId]) =>
        this.#sessions.sweepUser(userId, { sessionId, workerId }),
      );
      const failed = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      const ended = outcomes.filter((outcome) => outcome.status === 'fulfilled' && outcome.value).length;
      lost += ended;
      if (ended > 0) onSwept?.({ due: registered.length, lost: ended });
      if (outcomes.length === registered.length) await this.#workers.forgetLease(token);
    }
    return lost;
  }
}
