import { startRedisServer, type RedisServer } from '../redis-server.js';
import { HOST } from './address.js';
import { clusterPort } from './ports.js';

function nodeArgs(nodeTimeoutMs: number): string[] {
  return [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    String(nodeTimeoutMs),
    '--cluster-announce-ip',
    HOST,
    '--cluster-replica-validity-factor',
    '0',
    '--appendonly',
    'no',
    // A replica (also a resumed master that comes back as one) syncs at once instead of after 5 s.
    '--repl-diskless-sync-delay',
    '0',
  ];
}

/** Starts one cluster node, choosing another port pair when someone takes the chosen one first. */
export async function startNode(
  taken: Set<number>,
  ephemeral: [number, number] | undefined,
  nodeTimeoutMs: number,
  startTimeoutMs: number,
): Promise<RedisServer> {
  for (let attempt = 0; ; attempt++) {
    const port = await clusterPort(taken, ephemeral);
    try {
      return await startRedisServer({ port, args: nodeArgs(nodeTimeoutMs), startTimeoutMs });
    } catch (err) {
      const inUse = err instanceof Error && /Address already in use/.test(err.message);
      if (!inUse || attempt >= 4) throw err;
    }
  }
}
