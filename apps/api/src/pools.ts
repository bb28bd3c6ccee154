import type { PoolView, WorkerRecord, WorkerRegistry } from '@cq/coordinator';

/** The spawn queues' view of the sessions waiting for a host: the API's open pools (`SpawnQueues`). */
export interface QueuedSessions {
  readonly pools: readonly string[];
  waiting(pool: string): Promise<number>;
}

/** A pool as `GET /v1/pools` and the dashboard show it: its hosts and slots, and its sessions waiting. */
export type PoolWithPending = Pick<PoolView, 'pool' | 'hosts' | 'slots' | 'busy' | 'free'> & { pending: number };

/**
 * Every pool with a live host or a session waiting (a pool whose queue this process has open may have
 * sessions waiting and no host), each with its sessions waiting (0 where the queue cannot be read).
 * `hosts`: the live hosts, when the caller has just read them.
 */
export async function poolsWithPending(
  workers: WorkerRegistry,
  queued: QueuedSessions,
  hosts?: readonly WorkerRecord[],
): Promise<PoolWithPending[]> {
  const pending = new Map<string, number>();
  const count = async (pool: string): Promise<void> => {
    pending.set(pool, await queued.waiting(pool).catch(() => 0));
  };
  const open = queued.pools;
  await Promise.all(open.map(count));
  const pools = await workers.pools(
    open.filter((pool) => (pending.get(pool) ?? 0) > 0),
    hosts,
  );
  await Promise.all(pools.filter((p) => !pending.has(p.pool)).map((p) => count(p.pool)));
  return pools.map((p) => ({
    pool: p.pool,
    hosts: p.hosts,
    slots: p.slots,
    busy: p.busy,
    free: p.free,
    pending: pending.get(p.pool) ?? 0,
  }));
}
