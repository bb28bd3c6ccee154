import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';

/** A session registered (or to register) under the host lease. */
export interface Registration {
  readonly sessionId: string;
  readonly userId: string;
}

/** Every tenth periodic heartbeat registers every held session again (registrations lost with writes Redis forgot come back). */
export const REREGISTER_EVERY_BEATS = 10;

/** One lease, by its token: a lease that ran out is never renewed, the host takes a new one. */
interface Lease {
  readonly token: string;
  /** Until its first heartbeat went through: taken, not renewed. */
  fresh: boolean;
}

/** What one heartbeat carries for the lease, handed back to {@link HostLease} with the heartbeat's answer. */
export interface LeaseRenewal {
  readonly lease: Lease;
  /** Sessions registered for the first time with this heartbeat. */
  readonly fresh: readonly Registration[];
  /** Every session the heartbeat registers (the fresh ones, and on every tenth periodic one all held). */
  readonly register: readonly Registration[];
  /** This heartbeat registers every held session again (every tenth periodic one). */
  readonly again: boolean;
  /** When the heartbeat was sent (`performance.now()`): a lease renewed by it holds `LEASE_MS` from then. */
  readonly sentAt: number;
}

/**
 * The host lease (Chubby's session) as the host keeps it: renewed by every heartbeat, it keeps every
 * session registered under it running without a renewal of its own each third of `LEASE_MS`; until when
 * it holds is the send instant of its latest heartbeat that went through, plus `LEASE_MS`. A lease that
 * ran out (the host was frozen or cut off from Redis for longer) holds no longer and is never renewed:
 * the host takes a new one, for the sessions to come and those about to be registered. The sessions
 * held under it are the runner's (`SessionRunner.hold`); this type says until when.
 */
export class HostLease {
  readonly #workerId: string;
  readonly #leaseMs: number;
  readonly #logger: Logger;
  #current: Lease;
  /** Until when each token holds (`performance.now()`); a lost one: −∞. */
  readonly #holds = new Map<string, number>();
  /** Sessions started since the last heartbeat that went through: the next registers them. */
  #toRegister: Registration[] = [];
  /** Periodic heartbeats sent. */
  #beats = 0;

  constructor(workerId: string, leaseMs: number, logger: Logger) {
    this.#workerId = workerId;
    this.#leaseMs = leaseMs;
    this.#logger = logger;
    this.#current = this.#take();
  }

  #take(): Lease {
    return { token: `${this.#workerId}/${randomUUID()}`, fresh: true };
  }

  /** The current lease's token. */
  get token(): string {
    return this.#current.token;
  }

  /** A session started here: the next heartbeat registers it under the lease. */
  register(registration: Registration): void {
    this.#toRegister.push(registration);
  }

  /**
   * What the next heartbeat carries for the lease: the current one, and the sessions to register (of
   * those started since the last, the ones `running` still has; on every tenth periodic heartbeat, every
   * session `held` under the current lease again).
   */
  renewal(periodic: boolean, running: (sessionId: string) => boolean, held: () => Registration[]): LeaseRenewal {
    const fresh = this.#toRegister.filter((r) => running(r.sessionId));
    this.#toRegister = [];
    const again = periodic && this.#beats++ % REREGISTER_EVERY_BEATS === 0;
    return {
      lease: this.#current,
      fresh,
      register: again ? [...fresh, ...held()] : fresh,
      again,
      sentAt: performance.now(),
    };
  }

  /** The heartbeat that carried `renewal` went through and its lease held. */
  renewed({ lease, sentAt }: LeaseRenewal): void {
    if (lease === this.#current) lease.fresh = false;
    const holds = this.#holds.get(lease.token);
    if (holds !== Number.NEGATIVE_INFINITY) this.#holds.set(lease.token, Math.max(holds ?? 0, sentAt + this.#leaseMs));
  }

  /**
   * The lease ran out before the heartbeat that carried `renewal` renewed it: it holds no longer, a new
   * lease is taken (when it was the current one), and its fresh sessions are registered under the next.
   */
  ranOut(renewal: LeaseRenewal): void {
    const { lease } = renewal;
    this.#holds.set(lease.token, Number.NEGATIVE_INFINITY);
    if (lease === this.#current) {
      this.#current = this.#take();
      this.#logger.warn({ lost: lease.token }, 'the host lease ran out before it could be renewed; taking a new one');
    }
    this.#toRegister.push(...renewal.fresh);
  }

  /** The heartbeat that carried `renewal` failed: its sessions are registered with the next. */
  failed(renewal: LeaseRenewal): void {
    this.#toRegister.push(...renewal.fresh);
  }

  /** Until when the lease `token` holds, as a `performance.now()` instant (−∞ before its first renewal, or once lost). */
  holdsUntil(token: string): number {
    return this.#holds.get(token) ?? Number.NEGATIVE_INFINITY;
  }
}
