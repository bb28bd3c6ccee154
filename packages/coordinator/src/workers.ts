import type { Context } from './context.js';
import { ScriptCode, replyCode, unexpectedReply } from './errors.js';
import { wrapRedisError } from './redis-errors.js';
import { assertInteger, assertName } from './validate.js';

/** What a worker host publishes about itself. */
export interface WorkerHeartbeat {
  readonly workerId: string;
  /** Sessions it runs at once. */
  readonly slots: number;
  /** Slots in use. */
  readonly busy: number;
  /** When it started, epoch ms. */
  readonly startedAt: number;
}

/** A worker host as seen in the registry. */
export interface WorkerRecord extends WorkerHeartbeat {
  /** Its last heartbeat, epoch ms (Redis clock). */
  readonly seenAt: number;
}

/**
 * The registry of worker hosts: each publishes a heartbeat record with a time to live, so a dead host
 * disappears by itself; an index lists the hosts without a keyspace scan.
 */
export class WorkerRegistry {
  readonly #context: Context;

  constructor(context: Context) {
    this.#context = context;
  }

  /** Publishes (or refreshes) a host's record for `ttlMs`. One round trip. */
  async heartbeat(beat: WorkerHeartbeat, ttlMs: number): Promise<void> {
    assertName(beat.workerId, 'WORKER_ID');
    assertInteger(ttlMs, 'ttlMs', 1);
    const { keys, scripts } = this.#context;
    const reply = await scripts.run(
      'heartbeatWorker',
      [keys.worker(beat.workerId), keys.workers()],
      [beat.workerId, beat.slots, beat.busy, beat.startedAt, ttlMs, 1],
    );
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('heartbeatWorker', reply);
  }

  /** Removes a host's record at once (clean shutdown). One round trip. */
  async withdraw(workerId: string): Promise<void> {
    const { keys, scripts } = this.#context;
    await scripts.run('heartbeatWorker', [keys.worker(workerId), keys.workers()], [workerId, 0, 0, 0, 1, 0]);
  }

  /** The hosts whose heartbeat is live, by id. */
  async list(): Promise<WorkerRecord[]> {
    const { keys, redis } = this.#context;
    try {
      const ids = await redis.zrange(keys.workers(), 0, -1);
      const records = await Promise.all(ids.map((id) => redis.hgetall(keys.worker(id))));
      return records
        .filter((r) => r['id'] !== undefined)
        .map((r) => ({
          workerId: r['id']!,
          slots: Number(r['slots']),
          busy: Number(r['busy']),
          startedAt: Number(r['startedAt']),
          seenAt: Number(r['seenAt']),
        }));
    } catch (err) {
      throw wrapRedisError(err);
    }
  }
}
