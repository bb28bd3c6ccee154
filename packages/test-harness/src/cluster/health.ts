import { onNode } from './probe.js';
import { clusterSlots, coversAllSlots, describeSlots } from './slots.js';

/** What one running node says about the cluster, or why it said nothing. */
export interface NodeView {
  readonly port: number;
  readonly state?: string;
  readonly slots?: string;
  readonly complete?: boolean;
  readonly masterPorts?: readonly number[];
  /** Ports this node flags `fail` / `fail?` / `handshake` / `noaddr`, or whose link is disconnected. */
  readonly troubled?: readonly number[];
  /** For a replica: `master_link_status` of INFO replication (`up` once it has synced). */
  readonly replicaLink?: string;
  readonly error?: string;
}

export async function viewOf(port: number): Promise<NodeView> {
  try {
    return await onNode(port, async (redis) => {
      const info = String(await redis.call('CLUSTER', 'INFO'));
      const state = /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
      const ranges = await clusterSlots(redis);
      const nodes = String(await redis.call('CLUSTER', 'NODES'));
      const replication = String(await redis.call('INFO', 'replication'));
      const replicaLink = /role:slave/.test(replication)
        ? (/master_link_status:(\w+)/.exec(replication)?.[1] ?? 'unknown')
        : undefined;
      const troubled: number[] = [];
      for (const line of nodes.split('\n')) {
        const [, address, flags, , , , , link] = line.split(' ');
        if (address === undefined || flags === undefined) continue;
        const nodePort = Number(/:(\d+)@/.exec(address)?.[1]);
        const bad = flags.split(',').some((f) => ['fail', 'fail?', 'handshake', 'noaddr'].includes(f));
        if (bad || (link === 'disconnected' && !flags.includes('myself'))) troubled.push(nodePort);
      }
      return {
        port,
        state,
        slots: describeSlots(ranges),
        complete: coversAllSlots(ranges),
        masterPorts: [...new Set(ranges.map((r) => r.masterPort))],
        troubled,
        replicaLink,
      };
    });
  } catch (err) {
    return { port, error: err instanceof Error ? err.message : String(err) };
  }
}

/** Why the views do not make a healthy cluster yet, or undefined when they do. */
export function unhealthy(views: readonly NodeView[], running: ReadonlySet<number>): string | undefined {
  if (views.length === 0) return 'no node is running';
  for (const v of views) {
    if (v.error !== undefined) return `node ${v.port} does not answer: ${v.error}`;
    if (v.state !== 'ok') return `node ${v.port} reports cluster_state:${v.state}`;
    if (v.complete !== true) return `node ${v.port} does not see a master for every slot: ${v.slots}`;
    const down = v.masterPorts?.filter((p) => !running.has(p)) ?? [];
    if (down.length > 0) return `node ${v.port} still names halted node(s) ${down.join(', ')} as master`;
    const troubled = v.troubled?.filter((p) => running.has(p)) ?? [];
    if (troubled.length > 0)
      return `node ${v.port} thinks running node(s) ${troubled.join(', ')} are failing or unreachable`;
    if (v.replicaLink !== undefined && v.replicaLink !== 'up')
      return `replica ${v.port} has not synced with its master (master_link_status:${v.replicaLink})`;
  }
  const first = views[0]!;
  const other = views.find((v) => v.slots !== first.slots);
  if (other !== undefined)
    return `nodes disagree on slot masters: ${first.port} says ${first.slots}, ${other.port} says ${other.slots}`;
  return undefined;
}
