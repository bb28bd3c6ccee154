import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Options of {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /**
   * How many masters share the 16384 slots (at least 3, as `redis-cli --cluster create` demands).
   * @defaultValue 3
   */
  masters?: number;
  /**
   * How many replicas follow each master.
   * @defaultValue 1
   */
  replicasPerMaster?: number;
  /**
   * `cluster-node-timeout`: how long a node may stay silent before it is thought down, in milliseconds.
   * A failover takes roughly twice this plus up to a second of election delay.
   * @defaultValue 1000
   */
  nodeTimeoutMs?: number;
  /**
   * How long the whole start (nodes, `redis-cli --cluster create`, agreement) may take, in milliseconds.
   * @defaultValue 30000
   */
  startTimeoutMs?: number;
}

/** A host and port, as `new Cluster(nodes)` of ioredis takes them. */
export interface ClusterNodeAddress {
  readonly host: string;
  readonly port: number;
}

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

const SLOTS = 16384;
const HOST = '127.0.0.1';
/** A cluster node listens on its port plus this for the cluster bus. */
const BUS_OFFSET = 10_000;
const PORT_MIN = 20_000;
const PORT_MAX = 39_999;
/** How long one probe of one node may take before it counts as not answering. */
const PROBE_TIMEOUT_MS = 1000;
const POLL_MS = 50;

/** Name of the binary: `REDIS_CLI_BIN`, else `redis-cli` on the PATH. */
export function redisCliBinary(): string {
  return process.env['REDIS_CLI_BIN'] ?? 'redis-cli';
}

async function portFree(port: number): Promise<boolean> {
  const server = createServer();
  try {
    server.listen(port, HOST);
    await once(server, 'listening');
  } catch {
    return false;
  }
  server.close();
  await once(server, 'close');
  return true;
}

/** The kernel's range of ports for outgoing connections, which a halted node's ports should stay out of. */
async function ephemeralRange(): Promise<[number, number] | undefined> {
  try {
    const [low, high] = (await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'))
      .trim()
      .split(/\s+/)
      .map(Number);
    return low !== undefined && high !== undefined && low > 0 && high >= low ? [low, high] : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A random port in 20000–39999 such that it and its bus port (port + 10000) are both free and not in
 * `taken`; adds both to `taken`. Pairs outside the kernel's ephemeral range are preferred: an outgoing
 * connection could otherwise take a halted node's port and make {@link RedisServer.resume} fail.
 */
async function clusterPort(taken: Set<number>, ephemeral: [number, number] | undefined): Promise<number> {
  const outside = (p: number): boolean => ephemeral === undefined || p < ephemeral[0] || p > ephemeral[1];
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = PORT_MIN + Math.floor(Math.random() * (PORT_MAX - PORT_MIN + 1));
    const bus = port + BUS_OFFSET;
    if (taken.has(port) || taken.has(bus)) continue;
    if (attempt < 100 && !(outside(port) && outside(bus))) continue;
    // Reserved before the first await, so nodes starting side by side never pick the same pair.
    taken.add(port).add(bus);
    if ((await portFree(port)) && (await portFree(bus))) return port;
    taken.delete(port);
    taken.delete(bus);
  }
  throw new Error(`no free port pair (p, p+${BUS_OFFSET}) found in ${PORT_MIN}–${PORT_MAX}: free some ports there`);
}

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
async function startNode(
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

/** Runs `redis-cli --cluster create` and resolves with its output, or rejects with it. */
function createCluster(ports: readonly number[], replicas: number, timeoutMs: number): Promise<string> {
  const bin = redisCliBinary();
  const args = [
    '--cluster',
    'create',
    ...ports.map((p) => `${HOST}:${p}`),
    '--cluster-replicas',
    String(replicas),
    '--cluster-yes',
  ];
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${bin} --cluster create did not finish within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        err.code === 'ENOENT'
          ? new Error(
              `${bin} not found: install Redis (apt-get install redis-server), set REDIS_CLI_BIN, ` +
                'or set REDIS_CLUSTER_NODES to a running cluster',
            )
          : err,
      );
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${bin} ${args.join(' ')} failed (${code ?? signal}):\n${output}`));
    });
  });
}

/**
 * Runs `fn` on a fresh standalone connection to one node and closes it again. A node that is down or
 * does not answer makes it reject within about {@link PROBE_TIMEOUT_MS} instead of hanging.
 */
async function onNode<T>(port: number, fn: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    connectTimeout: PROBE_TIMEOUT_MS,
    commandTimeout: PROBE_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    enableReadyCheck: false,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await fn(redis);
  } finally {
    if (redis.status !== 'end') {
      const ended = once(redis, 'end');
      redis.disconnect();
      await ended;
    }
  }
}

/** One slot range of CLUSTER SLOTS and the port of its master. */
interface SlotRange {
  readonly from: number;
  readonly to: number;
  readonly masterPort: number;
}

async function clusterSlots(redis: Redis): Promise<SlotRange[]> {
  const reply = (await redis.call('CLUSTER', 'SLOTS')) as [
    number,
    number,
    [string, number, ...unknown[]],
    ...unknown[],
  ][];
  return reply
    .map(([from, to, master]) => ({ from, to, masterPort: Number(master[1]) }))
    .sort((a, b) => a.from - b.from);
}

/** "0-5460:p1 5461-10922:p2 ...", or what is missing; comparable between nodes. */
function describeSlots(ranges: readonly SlotRange[]): string {
  return ranges.map((r) => `${r.from}-${r.to}:${r.masterPort}`).join(' ') || 'no slots';
}

function coversAllSlots(ranges: readonly SlotRange[]): boolean {
  let next = 0;
  for (const r of ranges) {
    if (r.from !== next) return false;
    next = r.to + 1;
  }
  return next === SLOTS;
}

/** What one running node says about the cluster, or why it said nothing. */
interface NodeView {
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

async function viewOf(port: number): Promise<NodeView> {
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
function unhealthy(views: readonly NodeView[], running: ReadonlySet<number>): string | undefined {
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

function clusterOf(servers: readonly RedisServer[]): RedisCluster {
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

/**
 * Starts a Redis Cluster of local `redis-server` processes on 127.0.0.1 (each in its own temporary
 * directory, without persistence besides `nodes.conf`), joins them with `redis-cli --cluster create`,
 * and resolves once every node agrees the cluster is ok. Nodes can be halted and resumed (their
 * `nodes.conf` makes them rejoin). Whatever was started is stopped again should the start fail.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicasPerMaster ?? 1;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1000;
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  if (!Number.isInteger(masters) || masters < 3)
    throw new RangeError(`a Redis Cluster needs at least 3 masters, got masters: ${masters}`);
  if (!Number.isInteger(replicas) || replicas < 0)
    throw new RangeError(`replicasPerMaster must be an integer ≥ 0, got ${replicas}`);
  const deadline = Date.now() + startTimeoutMs;
  const remaining = (): number => Math.max(1, deadline - Date.now());

  const ephemeral = await ephemeralRange();
  const taken = new Set<number>();
  const count = masters * (1 + replicas);
  const started = await Promise.allSettled(
    Array.from({ length: count }, () => startNode(taken, ephemeral, nodeTimeoutMs, remaining())),
  );
  const servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const cluster = clusterOf(servers);
  try {
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    await createCluster(
      servers.map((s) => s.port),
      replicas,
      remaining(),
    );
    await cluster.waitUntilOk(remaining());
    return cluster;
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}
