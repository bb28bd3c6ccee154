import { DEFAULT_POOL, containments } from '@cq/contract';
import type { Context } from './context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from './errors.js';
import {
  NO_ISOLATION,
  assertIsolation,
  containmentOf,
  isolationOf,
  type Containment,
  type Isolation,
} from './isolation.js';
import {
  HostLeases,
  hostLeaseAnswer,
  hostLeaseArgs,
  hostLeaseKeys,
  type HostLeaseAnswer,
  type HostLeaseBeat,
} from './liveness/host-leases.js';
import { lossGuardArgs } from './liveness/constants.js';
import { wrapRedisError } from './redis-errors.js';
import { assertInteger, assertName, assertPool } from './validate.js';

/** How long a host's nudges wait for its heartbeat: a host gone for longer has lost its sessions anyway. */
const NUDGE_TTL_MS = 60_000;

/** A worker host's state: taking sessions, or draining (taking none, exiting when its last one ends). */
export type WorkerState = 'active' | 'draining';

/** What a worker host publishes about itself. */
export interface WorkerHeartbeat {
  readonly workerId: string;
  /** Sessions it runs at once. */
  readonly slots: number;
  /** Slots in use. */
  readonly busy: number;
  /** When it started, epoch ms. */
  readonly startedAt: number;
  /** The sessions it runs (their holds on the capacity are renewed with the heartbeat). */
  readonly running?: readonly string[];
  /** The sessions it ended since its last heartbeat (their holds are given back). */
  readonly ended?: readonly string[];
  /**
   * `running` names every session the host runs (a periodic heartbeat): what is registered under the
   * lease beyond them is put right ({@link HostLeaseAnswer.gone}), looked for when more are registered
   * than run, or, with `'check'`, whatever the numbers.
   */
  readonly full?: boolean | 'check';
  /** How it keeps a session's processes inside it. @defaultValue `'group'` */
  readonly containment?: Containment;
  /** How it keeps its sessions apart. @defaultValue {@link NO_ISOLATION} */
  readonly isolation?: Isolation;
  /** The pool it serves: it runs only that pool's sessions, and its slots count in that pool. @defaultValue `'default'` */
  readonly pool?: string;
  /** The host's lease, renewed with the heartbeat (see {@link WorkerRegistry.publish}). */
  readonly lease?: HostLeaseBeat;
  /** Where API processes reach its session proxy listener (`host:port`); undefined: it has none. */
  readonly proxy?: string;
}

/** What a heartbeat answered: the state the host is asked to be in, and what became of its lease. */
export interface HeartbeatAnswer extends HostLeaseAnswer {
  readonly state: WorkerState;
  /**
   * The users whose session changed (a stop) since the host's last heartbeat, posted beside the host
   * channel's message: the host renews their sessions now, as on the channel's nudge.
   */
  readonly nudged: readonly string[];
}

/** A worker host as seen in the registry. */
export interface WorkerRecord {
  readonly workerId: string;
  readonly state: WorkerState;
  readonly slots: number;
  readonly busy: number;
  readonly startedAt: number;
  /** Its last heartbeat, epoch ms (Redis clock). */
  readonly seenAt: number;
  /** How it keeps a session's processes inside it (`group` for a record written without one). */
  readonly containment: Containment;
  /** How it keeps its sessions apart ({@link NO_ISOLATION} for a record written without it). */
  readonly isolation: Isolation;
  /** The pool it serves (`default` for a record written without one). */
  readonly pool: string;
  /** Where API processes reach its session proxy listener (`host:port`); undefined: it has none. */
  readonly proxy?: string;
}

/** A pool's worker capacity: slots of its live hosts (active hosts' `SLOTS`, draining hosts' running sessions). */
export interface Capacity {
  readonly total: number;
  /** Slots held by admitted sessions that have not ended. */
  readonly held: number;
  /** `total - held`, never below 0 (with the check off, more can be held than there is). */
  readonly free: number;
}

/** One pool as `GET /v1/pools` shows it: its live hosts and its capacity. */
export interface PoolView {
  readonly pool: string;
  readonly hosts: number;
  /** Slots of its live hosts (active hosts' `SLOTS`, draining hosts' running sessions). */
  readonly slots: number;
  /** Sessions its hosts run (their last heartbeats). */
  readonly busy: number;
  /** Slots held by admitted, unended sessions of the pool (with the capacity check on). */
  readonly held: number;
  /** Slots not held by an admitted, unended session. */
  readonly free: number;
}

/** Whether a slot was held for a session. */
export type ReserveOutcome =
  | { readonly outcome: 'reserved'; readonly free: number; readonly total: number }
  | { readonly outcome: 'no_capacity'; readonly total: number };

/**
 * The registry of worker hosts and the capacity they offer: each host publishes a heartbeat record with
 * a time to live, so a dead host (and its share of the capacity) disappears by itself; an index lists the
 * hosts without a keyspace scan. Every admitted session holds one slot until it ends, as in a counting
 * semaphore kept in the registry's cluster slot; see `lua/includes/capacity.lua`.
 */
export class WorkerRegistry {
  readonly #context: Context;
  /** The host leases the heartbeats take and renew (`liveness/host-leases.ts`). */
  readonly #leases: HostLeases;

  constructor(context: Context) {
    this.#context = context;
    this.#leases = new HostLeases(context);
  }

  #capacityKeys(pool: string = DEFAULT_POOL): string[] {
    const { keys } = this.#context;
    return [keys.workers(), keys.capacity(), keys.held(pool)];
  }

  /** `heartbeatWorker`'s keys: the host's record, the pool's capacity, the host's lease and its nudges. */
  #beatKeys(workerId: string, pool: string, leaseToken: string | undefined): string[] {
    const { keys } = this.#context;
    return [
      keys.worker(workerId),
      ...this.#capacityKeys(pool),
      ...hostLeaseKeys(keys, leaseToken),
      keys.hostNudges(workerId),
    ];
  }

  /**
   * Publishes (or refreshes) a host's record and share of the capacity for `ttlMs`, renews the holds of
   * its running sessions and gives back those of the ended ones. Answers the state the host is asked to
   * be in (`draining` once someone asked it to drain). One round trip.
   */
  async heartbeat(beat: WorkerHeartbeat, ttlMs: number): Promise<WorkerState> {
    return (await this.publish(beat, ttlMs)).state;
  }

  /**
   * {@link WorkerRegistry.heartbeat}, and the host's lease with it when `beat.lease` is given: renewed
   * (taken, for a fresh token) unless it ran out, which a lease never recovers from; the sessions named
   * are registered under it. One round trip.
   */
  async publish(beat: WorkerHeartbeat, ttlMs: number): Promise<HeartbeatAnswer> {
    assertName(beat.workerId, 'WORKER_ID');
    assertInteger(ttlMs, 'ttlMs', 1);
    const containment = beat.containment ?? 'group';
    if (!(containments as readonly string[]).includes(containment))
      throw new InvalidArgumentError(`containment must be one of ${containments.join(', ')}`);
    const isolation = assertIsolation(beat.isolation ?? NO_ISOLATION);
    const pool = beat.pool ?? DEFAULT_POOL;
    assertPool(pool);
    const { scripts } = this.#context;
    const reply = await scripts.run('heartbeatWorker', this.#beatKeys(beat.workerId, pool, beat.lease?.token), [
      beat.workerId,
      beat.slots,
      beat.busy,
      beat.startedAt,
      ttlMs,
      1,
      idList(beat.running ?? []),
      idList(beat.ended ?? []),
      containment,
      pool,
      ...hostLeaseArgs(beat.lease, beat.full),
      isolation.network,
      isolation.filesystem,
      isolation.cpus ?? '',
      ...lossGuardArgs,
      beat.proxy ?? '',
    ]);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('heartbeatWorker', reply);
    const nudged = Array.isArray(reply[4]) ? reply[4].map(String) : [];
    return { state: reply[2] === 'draining' ? 'draining' : 'active', nudged, ...hostLeaseAnswer(reply) };
  }

  /** Host leases that ran out, at most `limit`: {@link HostLeases.expired}. */
  expiredLeases(limit?: number): Promise<string[]> {
    return this.#leases.expired(limit);
  }

  /** The sessions registered under a host lease: {@link HostLeases.sessions}. */
  leaseSessions(token: string): Promise<Record<string, string>> {
    return this.#leases.sessions(token);
  }

  /** Forgets a host lease that ran out: {@link HostLeases.forget}. */
  forgetLease(token: string): Promise<boolean> {
    return this.#leases.forget(token);
  }

  /**
   * Posts a nudge for the user's session to its host, beside the host channel's message: the host takes
   * it with its next heartbeat, so a message lost on the channel (a subscription that stays open while
   * messages do not arrive) delays the change by a heartbeat, not until the session's next renewal. The
   * nudges of a host that never takes them go after a minute. One round trip.
   */
  async nudge(workerId: string, userId: string): Promise<void> {
    const { keys, scripts } = this.#context;
    await scripts.run('nudgeHost', [keys.hostNudges(workerId)], [userId, NUDGE_TTL_MS]);
  }

  /**
   * Recounts every pool's total slots from its hosts' shares, correcting a total that drifted from them
   * (Redis replayed or dropped some writes and not others). Answers how many totals it corrected. One
   * round trip; the sweep runs it with each sweep.
   */
  async recountCapacity(): Promise<number> {
    const { keys, scripts } = this.#context;
    const reply = await scripts.run('recountCapacity', [keys.capacity()], []);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('recountCapacity', reply);
    return Number(reply[1]);
  }

  /**
   * Removes a host's record and share of the capacity at once (clean shutdown), giving back the holds of
   * the sessions named, and its lease with what was registered under it. One round trip.
   */
  async withdraw(
    workerId: string,
    ended: readonly string[] = [],
    pool: string = DEFAULT_POOL,
    leaseToken?: string,
  ): Promise<void> {
    const { scripts } = this.#context;
    // ARGV[6] 0: withdrawn. The lease's token alone: the lease goes, with what was registered under it.
    const lease = leaseToken === undefined ? undefined : { token: leaseToken, ttlMs: 0, fresh: false };
    const args = [workerId, 0, 0, 0, 1, 0, '', idList(ended), '', pool, ...hostLeaseArgs(lease, false), '', '', ''];
    await scripts.run('heartbeatWorker', this.#beatKeys(workerId, pool, leaseToken), [...args, ...lossGuardArgs, '']);
  }

  /**
   * Asks a host to drain: it takes no new sessions (its free slots leave the capacity at once) and exits
   * once its running sessions have ended. Undefined when no live host has this id. One round trip.
   */
  async drain(workerId: string): Promise<WorkerRecord | undefined> {
    assertName(workerId, 'workerId');
    const { keys, scripts } = this.#context;
    const reply = await scripts.run('drainWorker', [keys.worker(workerId), ...this.#capacityKeys()], [workerId]);
    if (replyCode(reply) === ScriptCode.NoHost) return undefined;
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('drainWorker', reply);
    return {
      workerId,
      state: 'draining',
      slots: Number(reply[2]),
      busy: Number(reply[3]),
      seenAt: Number(reply[4]),
      startedAt: Number(reply[5]),
      containment: containmentOf(reply[6]),
      isolation: isolationOf(reply[8], reply[9], reply[10]),
      pool: String(reply[7] ?? DEFAULT_POOL),
    };
  }

  /**
   * Holds a slot of `pool` for an admitted session of it until `holdMs` from now (a host that runs it
   * renews the hold). With `enforce`, refuses when no slot of the pool is free; without, holds one all the
   * same. One round trip.
   */
  async reserve(
    sessionId: string,
    holdMs: number,
    enforce: boolean,
    pool: string = DEFAULT_POOL,
  ): Promise<ReserveOutcome> {
    assertName(sessionId, 'sessionId');
    assertInteger(holdMs, 'holdMs', 1);
    const reply = await this.#context.scripts.run('reserveSlot', this.#capacityKeys(pool), [
      sessionId,
      holdMs,
      enforce ? 1 : 0,
      pool,
    ]);
    if (replyCode(reply) === ScriptCode.NoCapacity) return { outcome: 'no_capacity', total: Number(reply[1]) };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('reserveSlot', reply);
    return { outcome: 'reserved', free: Math.max(0, Number(reply[1])), total: Number(reply[2]) };
  }

  /** Gives back the slots held for these sessions of `pool`. One round trip. */
  async release(sessionIds: readonly string[], pool: string = DEFAULT_POOL): Promise<number> {
    if (sessionIds.length === 0) return 0;
    const reply = await this.#context.scripts.run(
      'releaseSlots',
      [this.#context.keys.held(pool)],
      [idList(sessionIds)],
    );
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('releaseSlots', reply);
    return Number(reply[1]);
  }

  /** A pool's capacity now (after letting dead hosts and the pool's unrenewed holds go). One round trip. */
  async capacity(pool: string = DEFAULT_POOL): Promise<Capacity> {
    const reply = await this.#context.scripts.run('readCapacity', this.#capacityKeys(pool), [pool]);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('readCapacity', reply);
    const total = Number(reply[1]);
    const held = Number(reply[2]);
    return { total, held, free: Math.max(0, total - held) };
  }

  /**
   * Every pool that has a live host, slots counted, or is named in `also` (e.g. pools with sessions
   * waiting), with its hosts and its capacity (each pool's read lets its dead hosts and unrenewed holds
   * go). A read of the hosts (unless the caller has just read them: `hosts`, from {@link list}), of the
   * capacity hash, and one script per pool.
   */
  async pools(also: Iterable<string> = [], hosts?: readonly WorkerRecord[]): Promise<PoolView[]> {
    hosts ??= await this.list();
    let fields: Record<string, string>;
    try {
      fields = await this.#context.redis.hgetall(this.#context.keys.capacity());
    } catch (err) {
      throw wrapRedisError(err);
    }
    const names = new Set<string>([...also, ...hosts.map((h) => h.pool)]);
    for (const [field, value] of Object.entries(fields))
      if ((field === 'total' || field.startsWith('total:')) && Number(value) > 0)
        names.add(field === 'total' ? DEFAULT_POOL : field.slice('total:'.length));
    const sorted = [...names].sort();
    const capacities = await Promise.all(sorted.map((pool) => this.capacity(pool)));
    return sorted.map((pool, i) => {
      const mine = hosts.filter((h) => h.pool === pool);
      return {
        pool,
        hosts: mine.length,
        slots: capacities[i]!.total,
        busy: mine.reduce((n, h) => n + h.busy, 0),
        held: capacities[i]!.held,
        free: capacities[i]!.free,
      };
    });
  }

  /**
   * Where API processes reach the session proxy listener of host `workerId` (`host:port`), as its last
   * heartbeat said; undefined when the host's record ran out or it has no listener. One command.
   */
  async proxyOf(workerId: string): Promise<string | undefined> {
    const { keys, redis } = this.#context;
    try {
      const proxy = await redis.hget(keys.worker(workerId), 'proxy');
      return proxy === null || proxy === '' ? undefined : proxy;
    } catch (err) {
      throw wrapRedisError(err);
    }
  }

  /** The hosts whose heartbeat is live (their record has not run out), by id. */
  async list(): Promise<WorkerRecord[]> {
    const { keys, redis } = this.#context;
    try {
      const ids = await redis.zrange(keys.workers(), 0, -1);
      const records = await Promise.all(ids.map((id) => redis.hgetall(keys.worker(id))));
      return records
        .filter((r) => r['id'] !== undefined)
        .map((r) => ({
          workerId: r['id']!,
          state: r['state'] === 'draining' ? ('draining' as const) : ('active' as const),
          slots: Number(r['slots']),
          busy: Number(r['busy']),
          startedAt: Number(r['startedAt']),
          seenAt: Number(r['seenAt']),
          containment: containmentOf(r['containment']),
          isolation: isolationOf(r['network'], r['filesystem'], r['cpus']),
          pool: r['pool'] ?? DEFAULT_POOL,
          ...(r['proxy'] ? { proxy: r['proxy'] } : {}),
        }))
        .sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0));
    } catch (err) {
      throw wrapRedisError(err);
    }
  }
}

/** Session ids as one script argument. They are names (no commas), checked before they are joined. */
function idList(ids: readonly string[]): string {
  for (const id of ids) assertName(id, 'sessionId');
  return ids.join(',');
}
