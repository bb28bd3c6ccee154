import { containments } from '@cq/contract';
import type { Context } from './context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from './errors.js';
import { wrapRedisError } from './redis-errors.js';
import { assertInteger, assertName } from './validate.js';

/** A worker host's state: taking sessions, or draining (taking none, exiting when its last one ends). */
export type WorkerState = 'active' | 'draining';

export { containments };
/** How a worker host keeps a session's processes inside it; see {@link containments}. */
export type Containment = (typeof containments)[number];

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
  /** How it keeps a session's processes inside it. @defaultValue `'group'` */
  readonly containment?: Containment;
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
}

/** The worker capacity: slots of live hosts (active hosts' `SLOTS`, draining hosts' running sessions). */
export interface Capacity {
  readonly total: number;
  /** Slots held by admitted sessions that have not ended. */
  readonly held: number;
  /** `total - held`, never below 0 (with the check off, more can be held than there is). */
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

  constructor(context: Context) {
    this.#context = context;
  }

  #capacityKeys(): string[] {
    const { keys } = this.#context;
    return [keys.workers(), keys.capacity(), keys.held()];
  }

  /**
   * Publishes (or refreshes) a host's record and share of the capacity for `ttlMs`, renews the holds of
   * its running sessions and gives back those of the ended ones. Answers the state the host is asked to
   * be in (`draining` once someone asked it to drain). One round trip.
   */
  async heartbeat(beat: WorkerHeartbeat, ttlMs: number): Promise<WorkerState> {
    assertName(beat.workerId, 'WORKER_ID');
    assertInteger(ttlMs, 'ttlMs', 1);
    const containment = beat.containment ?? 'group';
    if (!(containments as readonly string[]).includes(containment))
      throw new InvalidArgumentError(`containment must be one of ${containments.join(', ')}`);
    const { keys, scripts } = this.#context;
    const reply = await scripts.run(
      'heartbeatWorker',
      [keys.worker(beat.workerId), ...this.#capacityKeys()],
      [
        beat.workerId,
        beat.slots,
        beat.busy,
        beat.startedAt,
        ttlMs,
        1,
        idList(beat.running ?? []),
        idList(beat.ended ?? []),
        containment,
      ],
    );
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('heartbeatWorker', reply);
    return reply[2] === 'draining' ? 'draining' : 'active';
  }

  /**
   * Removes a host's record and share of the capacity at once (clean shutdown), giving back the holds of
   * the sessions named. One round trip.
   */
  async withdraw(workerId: string, ended: readonly string[] = []): Promise<void> {
    const { keys, scripts } = this.#context;
    await scripts.run(
      'heartbeatWorker',
      [keys.worker(workerId), ...this.#capacityKeys()],
      [workerId, 0, 0, 0, 1, 0, '', idList(ended), ''],
    );
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
    };
  }

  /**
   * Holds a slot for an admitted session until `holdMs` from now (a host that runs it renews the hold).
   * With `enforce`, refuses when no slot is free; without, holds one all the same. One round trip.
   */
  async reserve(sessionId: string, holdMs: number, enforce: boolean): Promise<ReserveOutcome> {
    assertName(sessionId, 'sessionId');
    assertInteger(holdMs, 'holdMs', 1);
    const reply = await this.#context.scripts.run('reserveSlot', this.#capacityKeys(), [
      sessionId,
      holdMs,
      enforce ? 1 : 0,
    ]);
    if (replyCode(reply) === ScriptCode.NoCapacity) return { outcome: 'no_capacity', total: Number(reply[1]) };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('reserveSlot', reply);
    return { outcome: 'reserved', free: Math.max(0, Number(reply[1])), total: Number(reply[2]) };
  }

  /** Gives back the slots held for these sessions. One round trip. */
  async release(sessionIds: readonly string[]): Promise<number> {
    if (sessionIds.length === 0) return 0;
    const reply = await this.#context.scripts.run('releaseSlots', [this.#context.keys.held()], [idList(sessionIds)]);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('releaseSlots', reply);
    return Number(reply[1]);
  }

  /** The capacity now (after letting dead hosts and unrenewed holds go). One round trip. */
  async capacity(): Promise<Capacity> {
    const reply = await this.#context.scripts.run('readCapacity', this.#capacityKeys(), []);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('readCapacity', reply);
    const total = Number(reply[1]);
    const held = Number(reply[2]);
    return { total, held, free: Math.max(0, total - held) };
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
        }))
        .sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0));
    } catch (err) {
      throw wrapRedisError(err);
    }
  }
}

/** A host record's containment: `group` unless it says `namespace` (a record from an older host says nothing). */
function containmentOf(value: unknown): Containment {
  return value === 'namespace' ? 'namespace' : 'group';
}

/** Session ids as one script argument. They are names (no commas), checked before they are joined. */
function idList(ids: readonly string[]): string {
  for (const id of ids) assertName(id, 'sessionId');
  return ids.join(',');
}
