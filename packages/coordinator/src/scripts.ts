import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ReplyError, type Cluster, type Redis } from 'ioredis';
import { ScriptReplyError, UnavailableError } from './errors.js';
import { withTimeout } from './timeout.js';

/** A standalone ioredis client or a Redis Cluster client. */
export type RedisClient = Redis | Cluster;

/** Every script the coordinator runs; each is `lua/<name>-<numberOfKeys>.lua`. */
export const scriptNames = [
  'acquireLease',
  'admit',
  'cancelAdmission',
  'claimSession',
  'consumeToken',
  'finishSession',
  'fixedWindow',
  'gcra',
  'heartbeatWorker',
  'issueToken',
  'releaseLease',
  'renewLease',
  'renewSession',
  'requestStop',
  'readSession',
  'slidingWindow',
  'sweepSession',
] as const;

/** Name of a coordinator script. */
export type ScriptName = (typeof scriptNames)[number];

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
   * {@link Scripts.close}).
   * @defaultValue 8
   */
  connections?: number;
}

/** One script, with its includes expanded. */
export interface ScriptSource {
  readonly name: string;
  readonly numberOfKeys: number;
  readonly file: string;
  readonly lua: string;
}

/** The folder holding the scripts: `lua/` at the repository root (the same from `src/` and `dist/`). */
export const defaultScriptsDir = fileURLToPath(new URL('../../../lua/', import.meta.url));

const FILE_NAME = /^([a-z][A-Za-z0-9]*)-(\d+)\.lua$/;
const INCLUDE = /^--- @include "([^"]+)"\s*$/;

function expand(file: string, seen: Set<string>): string {
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => {
      const match = INCLUDE.exec(line);
      if (match === null) return line;
      const included = resolve(dirname(file), `${match[1]}.lua`);
      if (seen.has(included)) return `-- (already included: ${match[1]})`;
      seen.add(included);
      return expand(included, seen);
    })
    .join('\n');
}

/** Reads every script of `dir`, expanding `--- @include "path"` lines once per script. */
export function loadScripts(dir: string = defaultScriptsDir): Map<string, ScriptSource> {
  let files: string[];
  try {
    files = readdirSync(dir);
  } catch (cause) {
    throw new Error(`Lua scripts not found in ${dir}: pass scriptsDir pointing to the repository's lua/ folder`, {
      cause,
    });
  }
  const scripts = new Map<string, ScriptSource>();
  for (const name of files) {
    const match = FILE_NAME.exec(name);
    if (match === null) continue;
    const file = join(dir, name);
    scripts.set(match[1]!, {
      name: match[1]!,
      numberOfKeys: Number(match[2]),
      file,
      lua: expand(file, new Set([file])),
    });
  }
  const missing = scriptNames.filter((name) => !scripts.has(name));
  if (missing.length > 0) throw new Error(`Lua scripts missing from ${dir}: ${missing.join(', ')}`);
  return scripts;
}

let cached: Map<string, ScriptSource> | undefined;

type ScriptFunction = (...args: Array<string | number>) => Promise<unknown>;

/** True for errors that say Redis is unreachable, busy or failing over, rather than a bug of ours. */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof ReplyError) || !(err instanceof Error)) return true;
  return !/^(ERR|WRONGTYPE|NOSCRIPT)/.test(err.message);
}

/** Wraps a Redis failure: outages become {@link UnavailableError}; anything else is passed on. */
export function wrapRedisError(err: unknown): Error {
  if (isUnavailable(err)) return new UnavailableError(err);
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * The coordinator scripts registered on one client with `defineCommand`, so each call is a single
 * EVALSHA (EVAL once when the server does not know the script yet).
 */
export class Scripts {
  readonly #redis: RedisClient;
  readonly #sources: Map<string, ScriptSource>;
  readonly #wait: ReplicaWait | undefined;
  readonly #sha = new Map<string, string>();
  #waitPool: Array<{ connection: RedisClient; inFlight: number }> | undefined;
  #closed = false;

  readonly #timeoutMs: number | undefined;

  /**
   * @param timeoutMs - longest wait for a script's answer before it counts as unavailable. ioredis's
   *   own `commandTimeout` bounds a standalone client; a Cluster client retries a command through a
   *   failover (up to 16 redirections) and may hold it for seconds, so set this for Cluster.
   */
  constructor(redis: RedisClient, scriptsDir?: string, wait?: ReplicaWait, timeoutMs?: number) {
    this.#redis = redis;
    this.#timeoutMs = timeoutMs;
    this.#sources = scriptsDir === undefined ? (cached ??= loadScripts()) : loadScripts(scriptsDir);
    this.#wait = wait !== undefined && wait.replicas > 0 ? wait : undefined;
    for (const source of this.#sources.values())
      this.#sha.set(source.name, createHash('sha1').update(source.lua).digest('hex'));
    for (const source of this.#sources.values()) {
      if (typeof (redis as unknown as Record<string, unknown>)[source.name] === 'function') continue;
      redis.defineCommand(source.name, { numberOfKeys: source.numberOfKeys, lua: source.lua });
    }
  }

  /** Closes the connections opened for waited writes (the client given to the constructor stays open). */
  async close(): Promise<void> {
    this.#closed = true;
    const pool = this.#waitPool ?? [];
    this.#waitPool = undefined;
    await Promise.all(
      pool.map(({ connection }) =>
        connection.status === 'ready'
          ? connection.quit().then(
              () => {},
              () => connection.disconnect(),
            )
          : connection.disconnect(),
      ),
    );
  }

  /** Loads every script into the server's script cache, so that the first calls are single EVALSHAs too. */
  async preload(): Promise<void> {
    const nodes = 'nodes' in this.#redis ? this.#redis.nodes('master') : [this.#redis];
    try {
      await Promise.all(nodes.flatMap((node) => [...this.#sources.values()].map((s) => node.script('LOAD', s.lua))));
    } catch (err) {
      throw wrapRedisError(err);
    }
  }

  /** Runs a script: one round trip. Throws {@link UnavailableError} when Redis cannot answer. */
  async run(name: ScriptName, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown[]> {
    const source = this.#sources.get(name);
    if (source === undefined || keys.length !== source.numberOfKeys) {
      throw new Error(`script ${name} takes ${source?.numberOfKeys ?? '?'} keys, got ${keys.length}`);
    }
    let reply: unknown;
    try {
      let call: Promise<unknown>;
      if (this.#wait !== undefined) {
        call = this.#runAndWait(name, source, keys, args, this.#wait);
      } else {
        const fn = (this.#redis as unknown as Record<string, ScriptFunction>)[name]!;
        call = fn.call(this.#redis, ...keys, ...args);
      }
      reply = await (this.#timeoutMs === undefined ? call : withTimeout(call, this.#timeoutMs, 'Command'));
    } catch (err) {
      throw wrapRedisError(err);
    }
    if (!Array.isArray(reply)) throw new ScriptReplyError(name, reply);
    return reply as unknown[];
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
