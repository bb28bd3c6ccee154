import type { Context } from '../context.js';
import { ScriptCode, replyCode, unexpectedReply } from '../errors.js';
import type { Keys } from '../keys.js';
import { lossGuardArgs } from './constants.js';
import { wrapRedisError } from '../redis-errors.js';

/** A host lease's part of a heartbeat. */
export interface HostLeaseBeat {
  /**
   * The lease's token, `<workerId>/<unique>`: one per host process and lease (a lease that was lost is
   * never renewed). The sweep reads the host's id from it: of the sessions registered under a lease
   * that ran out, it ends only those this host claimed.
   */
  readonly token: string;
  /** How long the lease lasts from the heartbeat, ms (`LEASE_MS`). */
  readonly ttlMs: number;
  /** True for the token's first heartbeat: the lease is taken, not renewed. */
  readonly fresh: boolean;
  /** Sessions to register under the lease (a sweep ends them as `lost` once it ran out). */
  readonly register?: readonly { readonly sessionId: string; readonly userId: string }[];
}

/** What a heartbeat answered of the host's lease. */
export interface HostLeaseAnswer {
  /** `held`: renewed (or taken) for its time to live, and the sessions registered; `lost`: it ran out. */
  readonly lease: 'held' | 'lost' | undefined;
  /**
   * With a full heartbeat (`WorkerHeartbeat.full`): the sessions registered under the lease that the
   * host does not run (their ends were in writes Redis lost or replayed). Their holds and registrations
   * are gone; their records are the host's to end (`SessionStore.sweepUser`).
   */
  readonly gone: ReadonlyArray<{ sessionId: string; userId: string }>;
}

/**
 * The keys of a host lease in `heartbeatWorker` (its KEYS[5] to KEYS[7]): those of an unused token
 * when the host keeps none, which stay untouched.
 */
export function hostLeaseKeys(keys: Keys, token: string | undefined): string[] {
  return [keys.hostLeases(), keys.hostSessions(token ?? '-'), keys.workersGuard()];
}

/**
 * A heartbeat's arguments for its host lease (`heartbeatWorker`'s ARGV[11] to ARGV[15]): the lease
 * and, with `full` (the heartbeat names every session the host runs), how what is registered under
 * it is put right.
 */
export function hostLeaseArgs(
  lease: HostLeaseBeat | undefined,
  full: boolean | 'check' | undefined,
): Array<string | number> {
  return [
    lease?.token ?? '',
    lease?.ttlMs ?? 0,
    lease?.fresh === true ? 1 : '',
    (lease?.register ?? []).map((r) => `${r.sessionId}=${r.userId}`).join(','),
    full === 'check' ? 2 : full === true ? 1 : '',
  ];
}

/** The host lease's part of `heartbeatWorker`'s reply (its 4th and 6th entries). */
export function hostLeaseAnswer(reply: readonly unknown[]): HostLeaseAnswer {
  const lease = reply[3] === 'held' ? 'held' : reply[3] === 'lost' ? 'lost' : undefined;
  const gone = (Array.isArray(reply[5]) ? reply[5].map(String) : []).map((entry) => {
    const at = entry.indexOf('=');
    return { sessionId: entry.slice(0, at), userId: entry.slice(at + 1) };
  });
  return { lease, gone };
}

/**
 * The host leases (`{workers}:host-leases`): one per host process and lease token, taken and renewed
 * by the host's heartbeats (`WorkerRegistry.publish`, one script with the host's record), with the
 * sessions registered under each. This is what the sweep reads of them: the leases that ran out, the
 * sessions registered under one, and forgetting one once its sessions are ended
 * (`sweeper/host-leases.ts`).
 */
export class HostLeases {
  readonly #context: Context;

  constructor(context: Context) {
    this.#context = context;
  }

  /**
   * Host leases that ran out (none while the {workers} slot's loss guard waits after Redis may have
   * lost writes), at most `limit`. One round trip.
   */
  async expired(limit = 100): Promise<string[]> {
    const { keys, scripts } = this.#context;
    const reply = await scripts.run('sweepHosts', [keys.hostLeases(), keys.workersGuard()], [limit, ...lossGuardArgs]);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('sweepHosts', reply);
    return reply.slice(1).map(String);
  }

  /** The sessions registered under a host lease: user id by session id. One command (HGETALL). */
  async sessions(token: string): Promise<Record<string, string>> {
    try {
      return await this.#context.redis.hgetall(this.#context.keys.hostSessions(token));
    } catch (err) {
      throw wrapRedisError(err);
    }
  }

  /** Forgets a host lease that ran out, with its registrations (false: it holds). One round trip. */
  async forget(token: string): Promise<boolean> {
    const { keys, scripts } = this.#context;
    const reply = await scripts.run('forgetHost', [keys.hostLeases(), keys.hostSessions(token)], [token]);
    return replyCode(reply) === ScriptCode.Ok;
  }
}
