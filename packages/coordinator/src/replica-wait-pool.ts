import { createHash } from 'node:crypto';
import { closeRedis } from './close-redis.js';
import type { RedisClient } from './redis-errors.js';
import type { ScriptName, ScriptSource } from './script-loader.js';

/**
 * Asks every coordinator write to be acknowledged by replicas (`WAIT`) before it counts as done,
 * narrowing what a failover can lose.
 */
export interface ReplicaWait {
  /** Replicas that must acknowledge each write (`REDIS_WAIT_REPLICAS`). */
  replicas: number;
  /** Longest wait for them, ms; the write stands either way. */
  timeoutMs: number;
  /** Called when fewer replicas acknowledged a write within the time: the write may be lost in a failover. */
  onShortfall?: (script: ScriptName, acknowledged: number) => void;
  /**
   * Connections for waited writes. Redis reads nothing more from a connection while a `WAIT` on it
   * blocks, so concurrent writes on one shared connection would queue behind each other's wait; they
   * are spread over this many duplicates of the client instead (opened on first use, closed by
   * {@link ReplicaWaitPool.close}).
   * @defaultValue 8
   */
  connections?: number;
}

/**
 * The connections for waited writes (see {@link ReplicaWait.connections}) and the script + `WAIT`
 * pipelines sent on them.
 */
export class ReplicaWaitPool {
  readonly #redis: RedisClient;
  readonly #wait: ReplicaWait;
  readonly #sha = new Map<string, string>();
  #waitPool: Array<{ connection: RedisClient; inFlight: number }> | undefined;
  #closed = false;

  constructor(redis: RedisClient, wait: ReplicaWait, sources: Iterable<ScriptSource>) {
    this.#redis = redis;
    this.#wait = wait;
    for (const source of sources) this.#sha.set(source.name, createHash('sha1').update(source.lua).digest('hex'));
  }

  /** Runs `source` and waits for the replicas: one round trip. */
  run(
    name: ScriptName,
    source: ScriptSource,
    keys: readonly string[],
    args: ReadonlyArray<string | number>,
  ): Promise<unknown> {
    return this.#runAndWait(name, source, keys, args, this.#wait);
  }

  /** Closes the pooled connections. */
  async close(): Promise<void> {
    this.#closed = true;
    const pool = this.#waitPool ?? [];
    this.#waitPool = undefined;
    await Promise.all(pool.map(({ connection }) => closeRedis(connection)));
  }

  /**
   * The connections for waited writes, opened on first use: duplicates of the client with an offline
   * queue, so a write sent while one is still connecting waits for it (bounded by the timeout).
   */
  #waiters(wait: ReplicaWait): Array<{ connection: RedisClient; inFlight: number }> {
    if (this.#closed) throw new Error('the coordinator is closed');
    this.#waitPool ??= Array.from({ length: Math.max(1, wait.connections ?? 8) }, () => {
      const connection =
        'refreshSlotsCache' in this.#redis
          ? this.#redis.duplicate(undefined, { enableOfflineQueue: true })
          : this.#redis.duplicate({ enableOfflineQueue: true });
      // Failures reach the caller through its command; the client given to us reports outages.
      connection.on('error', () => {});
      return { connection, inFlight: 0 };
    });
    return this.#waitPool;
  }

  /**
   * The script and a `WAIT` in one pipeline: one round trip, on the connection (on Cluster: the
   * master of the keys' slot) that ran the write, so `WAIT` counts the replicas that have it. The
   * pipeline goes to the pooled connection with the fewest calls in flight, since a `WAIT` holds its
   * connection. EVALSHA first; on NOSCRIPT, EVAL with the same `WAIT` behind it.
   */
  async #runAndWait(
    name: ScriptName,
    source: ScriptSource,
    keys: readonly string[],
    args: ReadonlyArray<string | number>,
    wait: ReplicaWait,
  ): Promise<unknown> {
    const waiter = this.#waiters(wait).reduce((least, w) => (w.inFlight < least.inFlight ? w : least));
    const { connection } = waiter;
    const send = async (command: 'evalsha' | 'eval'): Promise<[Error | null, unknown][]> => {
      const pipeline = connection.pipeline();
      if (command === 'evalsha') pipeline.evalsha(this.#sha.get(name)!, keys.length, ...keys, ...args);
      else pipeline.eval(source.lua, keys.length, ...keys, ...args);
      pipeline.wait(wait.replicas, wait.timeoutMs);
      const results = await pipeline.exec();
      if (results === null || results.length < 2) throw new Error('the pipeline was not executed (connection lost)');
      return results;
    };
    waiter.inFlight++;
    try {
      return await this.#sendAndWait(name, send, connection, wait);
    } finally {
      waiter.inFlight--;
    }
  }

  async #sendAndWait(
    name: ScriptName,
    send: (command: 'evalsha' | 'eval') => Promise<[Error | null, unknown][]>,
    connection: RedisClient,
    wait: ReplicaWait,
  ): Promise<unknown> {
    let results = await send('evalsha');
    if (/^(MOVED|ASK) /.test(results[0]?.[0]?.message ?? '') && 'refreshSlotsCache' in connection) {
      // ioredis follows redirections of a pipeline only when all its other commands are reads, and
      // WAIT is not: learn the new slot owners (as after a failover or resharding) and send it again.
      const cluster = connection;
      await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
      results = await send('evalsha');
    }
    if (results[0]?.[0]?.message.startsWith('NOSCRIPT')) results = await send('eval');
    const [[scriptErr, reply] = [null, undefined], [waitErr, acknowledged] = [null, 0]] = results;
    if (scriptErr !== null) throw scriptErr;
    if (waitErr !== null || typeof acknowledged !== 'number' || acknowledged < wait.replicas) {
      wait.onShortfall?.(name, typeof acknowledged === 'number' ? acknowledged : 0);
    }
    return reply;
  }
}
