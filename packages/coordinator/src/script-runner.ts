import { ScriptReplyError } from './errors.js';
import { wrapRedisError, type RedisClient } from './redis-errors.js';
import { ReplicaWaitPool, type ReplicaWait } from './replica-wait-pool.js';
import { loadScripts, type ScriptName, type ScriptSource } from './script-loader.js';
import { scriptTable } from './script-table.js';
import { withTimeout } from './timeout.js';

let cached: Map<string, ScriptSource> | undefined;

type ScriptFunction = (...args: Array<string | number>) => Promise<unknown>;

/**
 * The coordinator scripts registered on one client with `defineCommand`, so each call is a single
 * EVALSHA (EVAL once when the server does not know the script yet).
 */
export class Scripts {
  readonly #redis: RedisClient;
  readonly #sources: Map<string, ScriptSource>;
  /** Set when writes wait for replicas (`REDIS_WAIT_REPLICAS` > 0). */
  readonly #waits: ReplicaWaitPool | undefined;
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
    this.#waits =
      wait !== undefined && wait.replicas > 0 ? new ReplicaWaitPool(redis, wait, this.#sources.values()) : undefined;
    for (const source of this.#sources.values()) {
      if (typeof (redis as unknown as Record<string, unknown>)[source.name] === 'function') continue;
      redis.defineCommand(source.name, { numberOfKeys: source.numberOfKeys, lua: source.lua });
    }
  }

  /** Closes the connections opened for waited writes (the client given to the constructor stays open). */
  async close(): Promise<void> {
    await this.#waits?.close();
  }

  /** The source of a script, with its includes expanded (for calls sent to one node by hand). */
  source(name: ScriptName): string {
    return this.#sources.get(name)!.lua;
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
    const spec = scriptTable[name];
    if (source === undefined || keys.length !== spec.keys || args.length !== spec.args) {
      throw new Error(
        `script ${name} takes ${spec.keys} keys and ${spec.args} args, got ${keys.length} and ${args.length}`,
      );
    }
    let reply: unknown;
    try {
      let call: Promise<unknown>;
      if (this.#waits !== undefined) {
        call = this.#waits.run(name, source, keys, args);
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
}
