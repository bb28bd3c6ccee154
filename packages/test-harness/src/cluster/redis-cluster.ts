import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisServer } from '../redis-server.js';
import { HOST, type ClusterNodeAddress } from './address.js';
import { unhealthy, viewOf } from './health.js';
import { onNode } from './probe.js';
import { clusterSlots, describeSlots, SLOTS, type SlotRange } from './slots.js';

/** A Redis Cluster of local `redis-server` processes started by {@link startRedisCluster}. */
export interface RedisCluster {
  /** Every node, in start order (the first `masters` were made masters by `redis-cli --cluster create`). */
  readonly servers: readonly RedisServer[];
  /** Every node as `127.0.0.1:p1,127.0.0.1:p2,...`, the form of `REDIS_CLUSTER_NODES`. */
  readonly seeds: string;
  /** Every node as `{ host, port }`, for `new Cluster(cluster.nodes)` of ioredis. */
  readonly nodes: readonly ClusterNodeAddress[];
  /** The server that is master of `slot` now, as CLUSTER SLOTS of the first live node that answers says. */
  masterOf(slot: number): Promise<RedisServer>;
  /**
   * Resolves when every running node reports `cluster_state:ok`, all running nodes agree on who masters
   * every slot, each of those masters is running, no running node thinks another running node is
   * failing, and every running replica has synced with its master (so a resumed node has rejoined, and
   * `WAIT` works). Halted nodes are skipped. Rejects after `timeoutMs` with
   * what each node said last.
   * @param timeoutMs - defaults to 30000
   */
  waitUntilOk(timeoutMs?: number): Promise<void>;
  /** Stops every node and removes their directories. */
  stop(): Promise<void>;
}

/** How often {@link RedisCluster.waitUntilOk} asks the nodes again, in milliseconds. */
const POLL_MS = 50;

/** The {@link RedisCluster} handle over nodes already started (and, once created, joined). */
export function clusterOf(servers: readonly RedisServer[]): RedisCluster {
  const running = (): RedisServer[] => servers.filter((s) => s.pid() !== undefined);
  const byPort = (port: number): RedisServer | undefined => servers.find((s) => s.port === port);

  return {
    servers,
    seeds: servers.map((s) => `${HOST}:${s.port}`).join(','),
    nodes: servers.map((s) => ({ host: HOST, port: s.port })),

    masterOf: async (slot) => {
      if (!Number.isInteger(slot) || slot < 0 || slot >= SLOTS)
        throw new RangeError(`slot must be an integer in 0–${SLOTS - 1}, got ${slot}`);
      const failures: string[] = [];
      for (const server of running()) {
        let ranges: SlotRange[];
        try {
          ranges = await onNode(server.port, clusterSlots);
        } catch (err) {
          failures.push(`${server.port}: ${err instanceof Error ? err.message : String(err)}`);
          continue;
        }
        const range = ranges.find((r) => r.from <= slot && slot <= r.to);
        if (range === undefined)
          throw new Error(
            `node ${server.port} knows no master of slot ${slot}: ${describeSlots(ranges)}; call waitUntilOk() first`,
          );
        const master = byPort(range.masterPort);
        if (master === undefined)
          throw new Error(
            `node ${server.port} names ${range.masterPort}, not a node of this cluster, as master of slot ${slot}`,
          );
        return master;
      }
      throw new Error(
        `no running node answered CLUSTER SLOTS (${failures.join('; ') || 'all nodes are halted'}); resume() a node first`,
      );
    },

    waitUntilOk: async (timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const live = running();
        const views = await Promise.all(live.map((s) => viewOf(s.port)));
        const problem = unhealthy(views, new Set(live.map((s) => s.port)));
        if (problem === undefined) return;
        if (Date.now() >= deadline) {
          const seen = views.map((v) =>
            v.error !== undefined
              ? `  ${v.port}: ${v.error}`
              : `  ${v.port}: cluster_state:${v.state} slots ${v.slots}`,
          );
          throw new Error(`Redis Cluster not ok within ${timeoutMs} ms: ${problem}\nlast seen:\n${seen.join('\n')}`);
        }
        await sleep(POLL_MS);
      }
    },

    stop: async () => {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}
