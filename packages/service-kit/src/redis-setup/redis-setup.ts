import type { Cluster, Redis } from 'ioredis';
import { ConfigError } from '../config.js';
import { BUDGET } from '../time.js';
import { judge, oneLine, refusalLine, type Finding, type NodeFacts, type RedisRisk } from './findings.js';
import { probeNode } from './probe.js';

/** The part of a logger the check needs (a pino or Fastify logger fits). */
export interface SetupLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Options of {@link RedisSetup}. */
export interface RedisSetupOptions {
  /** The process's main connection: its first connect and each reconnect are checked. */
  client: Redis | Cluster;
  /** `KEY_PREFIX`: the check names its keys and channels under it. */
  keyPrefix: string;
  /** `REDIS_ACCEPT_RISKS`: what is reported but lets the process start. */
  accept: ReadonlySet<RedisRisk>;
  logger: SetupLogger;
  /**
   * How long {@link RedisSetup.start} waits for the first connection, ms; a Redis that is not there by
   * then is checked when it comes.
   * @defaultValue {@link BUDGET}.connectMs
   */
  connectTimeoutMs?: number;
}

/**
 * The one-line reason Redis refused the credentials of `REDIS_URL`, when `err` is such a refusal:
 * a wrong user or password, a user switched off (`WRONGPASS`), or no password where one is needed
 * (`NOAUTH`). The password itself is never in it (Redis does not repeat it).
 */
export function credentialsRefused(err: unknown, node: string): string | undefined {
  const message = err instanceof Error ? err.message : '';
  if (/^WRONGPASS\b|^ERR invalid password/.test(message))
    return (
      `REDIS_URL: Redis at ${node} refused the user name or password (${message.trim()}): ` +
      `set the user and password of an ACL user that is on, redis://<user>:<password>@<host>:<port>`
    );
  if (/^NOAUTH\b/.test(message))
    return (
      `REDIS_URL: Redis at ${node} asks for a password (${message.trim()}): ` +
      `put the user and password in REDIS_URL, redis://<user>:<password>@<host>:<port>`
    );
  return undefined;
}

function isCluster(client: Redis | Cluster): client is Cluster {
  return 'nodes' in client && typeof (client as Cluster).nodes === 'function' && 'refreshSlotsCache' in client;
}

function addressOf(node: Redis): string {
  return `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
}

/** A connection of its own to the same process as `node`, for one check: no retries, bounded commands. */
function checkConnection(node: Redis): Redis {
  const connection = node.duplicate({
    lazyConnect: true,
    retryStrategy: () => null,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 0,
    connectTimeout: BUDGET.connectMs,
    commandTimeout: BUDGET.connectMs,
    connectionName: 'cq-setup-check',
    readOnly: false,
    // No CLIENT SETINFO, which the ACL the docs give cannot name (Redis 7.0 has no such command).
    disableClientInfo: true,
  });
  connection.on('error', () => {});
  return connection;
}

/** Reads one process's setup through a connection of its own, closed afterwards. */
async function probe(node: Redis, keyPrefix: string): Promise<NodeFacts> {
  const connection = checkConnection(node);
  try {
    await connection.connect();
    return await probeNode(connection, addressOf(node), keyPrefix);
  } finally {
    connection.disconnect();
  }
}

/**
 * Checks that the Redis the process uses keeps what the coordinator writes, when the process connects
 * and after each reconnect (for a Cluster, each node as it joins the connection pool, a replica promoted
 * by a failover among them): no eviction,
 * persistence, no AOF replay that drops the scripts' writes (redis/redis#14541), every command the
 * scripts and processes run allowed to the user; and the user and password accepted.
 *
 * At start ({@link RedisSetup.start}) a problem stops the process with one line (a {@link ConfigError}),
 * unless `REDIS_ACCEPT_RISKS` accepts it (then it is a warning, every start). After a reconnect a problem
 * is logged as an error and kept in {@link RedisSetup.problem} (the API's `/readyz` answers 503 with it)
 * until a later check finds it gone: the process goes on, as stopping it would stop its sessions too.
 */
export class RedisSetup {
  readonly #options: RedisSetupOptions;
  /** Refusing findings of the latest check of each node, by node. */
  readonly #found = new Map<string, Finding[]>();
  /** Accepted findings already warned of, by node: told once, not at every reconnect. */
  readonly #told = new Map<string, Set<string>>();
  /** The credentials' refusal since the last successful connect, if any. */
  #credentials: string | undefined;
  #started = false;
  #checks = 0;
  #closed = false;
  readonly #unwatch: Array<() => void> = [];

  constructor(options: RedisSetupOptions) {
    this.#options = options;
  }

  /**
   * What is wrong with Redis now, in one line: a refused user or password since the last reconnect, or
   * what the latest check found and `REDIS_ACCEPT_RISKS` does not accept; undefined when nothing is.
   */
  get problem(): string | undefined {
    if (this.#credentials !== undefined) return this.#credentials;
    const findings = [...this.#found.values()].flat();
    return findings.length === 0 ? undefined : oneLine(findings);
  }

  /** How many checks of a node have been made (or given up on), for whoever waits for the next one. */
  get checks(): number {
    return this.#checks;
  }

  /**
   * Waits for the first connection (at most `connectTimeoutMs`) and checks it. Throws a
   * {@link ConfigError} (one line) when Redis refuses the credentials, or when the check finds what
   * `REDIS_ACCEPT_RISKS` does not accept. Warns of what it accepts. Then watches the reconnects.
   */
  async start(): Promise<void> {
    const { accept, logger } = this.#options;
    if (accept.size > 0)
      logger.warn(
        { accept: [...accept] },
        `REDIS_ACCEPT_RISKS=${[...accept].join(',')}: Redis set up to lose writes in these ways does not stop this process`,
      );
    const connected = await this.#connected();
    this.#started = true;
    this.#watch();
    if (connected) {
      const findings = await this.#checkAll();
      if (findings !== undefined && findings.refusing.length > 0) throw new ConfigError(refusalLine(findings.refusing));
    }
  }

  /** Stops watching the reconnects. */
  close(): void {
    this.#closed = true;
    for (const off of this.#unwatch.splice(0)) off();
  }

  /** Resolves true once the client is ready, false after the timeout; throws when the credentials are refused. */
  async #connected(): Promise<boolean> {
    const { client } = this.#options;
    if (client.status === 'ready') return true;
    const timeoutMs = this.#options.connectTimeoutMs ?? BUDGET.connectMs;
    return await new Promise<boolean>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        client.off('ready', onReady);
        client.off('error', onError);
        client.off('node error', onNodeError);
      };
      const onReady = (): void => {
        done();
        resolve(true);
      };
      const refuse = (err: unknown, node: string): void => {
        const line = credentialsRefused(err, node);
        if (line === undefined) return;
        done();
        reject(new ConfigError(line));
      };
      const onError = (err: Error): void => {
        const cause = (err as Error & { lastNodeError?: Error }).lastNodeError ?? err;
        refuse(cause, isCluster(client) ? 'a cluster node' : addressOf(client));
      };
      const onNodeError = (err: Error, node: string): void => refuse(err, node);
      const timer = setTimeout(() => {
        done();
        resolve(false);
      }, timeoutMs);
      client.on('ready', onReady);
      client.on('error', onError);
      client.on('node error', onNodeError);
    });
  }

  /** Every node now: the one process, or a Cluster's nodes in the pool (masters, and replicas CLUSTER SLOTS lists). */
  #nodes(): Redis[] {
    const { client } = this.#options;
    return isCluster(client) ? client.nodes('all') : [client];
  }

  /** Checks every node; logs what it accepts; undefined when the check could not be made. */
  async #checkAll(): Promise<{ refusing: Finding[]; accepted: Finding[] } | undefined> {
    const results = await Promise.all(this.#nodes().map((node) => this.#check(node)));
    if (results.some((r) => r === undefined)) return undefined;
    const refusing = results.flatMap((r) => r!.refusing);
    const accepted = results.flatMap((r) => r!.accepted);
    return { refusing, accepted };
  }

  /** Checks one node; records and logs what it finds; undefined when it could not be checked. */
  async #check(node: Redis): Promise<{ refusing: Finding[]; accepted: Finding[] } | undefined> {
    const { keyPrefix, accept, logger } = this.#options;
    const address = addressOf(node);
    let facts: NodeFacts;
    try {
      facts = await probe(node, keyPrefix);
    } catch (err) {
      logger.warn({ err, node: address }, "could not check Redis's setup; it is checked again at the next reconnect");
      return undefined;
    } finally {
      this.#checks++;
    }
    const findings = judge([facts], accept);
    const told = this.#told.get(address) ?? new Set<string>();
    this.#told.set(address, told);
    for (const finding of findings.accepted) {
      if (told.has(finding.message)) continue;
      told.add(finding.message);
      logger.warn(
        { risk: finding.risk, node: finding.node },
        `accepted by REDIS_ACCEPT_RISKS=${finding.risk}: ${finding.message}`,
      );
    }
    const before = this.#found.get(address) ?? [];
    this.#found.set(address, findings.refusing);
    if (this.#started) {
      // After start: an error while it lasts (once per check), an info line when it is gone.
      if (findings.refusing.length > 0)
        logger.error({ node: address, risks: findings.refusing.map((f) => f.risk) }, oneLine(findings.refusing));
      else if (before.length > 0) logger.info({ node: address }, 'Redis setup checked again: the problem is gone');
    }
    return findings;
  }

  /** Checks each reconnect (a Cluster's nodes as they join the pool), and reports refused credentials. */
  #watch(): void {
    const { client, logger } = this.#options;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each event's own arguments
    const on = (emitter: Redis | Cluster, event: string, listener: (...args: any[]) => void): void => {
      emitter.on(event, listener);
      this.#unwatch.push(() => emitter.off(event, listener));
    };
    let checking: Promise<unknown> | undefined;
    const checkAgain = (node?: Redis): void => {
      if (this.#closed) return;
      this.#credentials = undefined;
      // One check at a time: one asked for meanwhile runs after it.
      const previous = checking ?? Promise.resolve();
      const mine: Promise<unknown> = previous
        .then(() => (this.#closed ? undefined : node === undefined ? this.#checkAll() : this.#check(node)))
        .finally(() => {
          if (checking === mine) checking = undefined;
        });
      checking = mine;
    };
    const onRefused = (err: unknown, node: string): void => {
      const line = credentialsRefused(err, node);
      if (line === undefined || line === this.#credentials) return;
      this.#credentials = line;
      logger.error({ node }, line);
    };
    if (isCluster(client)) {
      // A node joins the pool when it is found (at a slots refresh, after a failover or a restart): the
      // check connects to it on its own, whether or not the pool has used it yet.
      on(client, '+node', (node: Redis) => checkAgain(node));
      // (ioredis passes the node alone: its address is the key the findings are kept by.)
      on(client, '-node', (node: Redis) => {
        this.#found.delete(addressOf(node));
      });
      on(client, 'node error', (err: Error, key: string) => onRefused(err, key));
    } else {
      on(client, 'ready', () => checkAgain());
      on(client, 'error', (err: Error) => onRefused(err, addressOf(client)));
    }
  }
}
