import { ScriptReplyError, UnavailableError } from './errors.js';
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
    const argsFit = spec.rest === true ? args.length >= spec.args : args.length === spec.args;
    if (source === undefined || keys.length !== spec.keys || !argsFit) {
      throw new Error(
        `script ${name} takes ${spec.keys} keys and ${spec.args} args, got ${keys.length} and ${args.length}`,
      );
    }
    const call =
      this.#waits !== undefined
        ? () => this.#waits!.run(name, source, keys, args)
        : () => (this.#redis as unknown as Record<string, ScriptFunction>)[name]!.call(this.#redis, ...keys, ...args);
    return this.#answer(name, call);
  }

  /**
   * Runs a script that takes no key on every master (standalone: the one server), and answers each
   * one's reply: for work that must reach each server itself, such as a watermark mark. Each call is
   * a single EVALSHA too (the script is defined on each node as it is first met). No replica wait:
   * such a script writes nothing.
   */
  async runOnMasters(name: ScriptName, args: ReadonlyArray<string | number>): Promise<unknown[][]> {
    const source = this.#sources.get(name);
    const spec = scriptTable[name];
    if (source === undefined || spec.keys !== 0 || args.length !== spec.args)
      throw new Error(
        `script ${name} takes ${spec.keys} keys and ${spec.args} args, run on every master with 0 and ${args.length}`,
      );
    const redis = this.#redis;
    const masters = 'nodes' in redis ? redis.nodes('master') : [redis];
    if (masters.length === 0) throw new UnavailableError(new Error('no Redis Cluster master is known yet'));
    return Promise.all(
      masters.map((node) => {
        const commands = node as unknown as Record<string, ScriptFunction>;
        if (typeof commands[name] !== 'function') node.defineCommand(name, { numberOfKeys: 0, lua: source.lua });
        return this.#answer(name, () => commands[name]!.call(node, ...args));
      }),
    );
  }

  /** Sends one call (bounded by the timeout) and checks its reply is a script's array. */
  async #answer(name: ScriptName, send: () => Promise<unknown>): Promise<unknown[]> {
    let reply: unknown;
    try {
      const call = send();
      reply = await (this.#timeoutMs === undefined ? call : withTimeout(call, this.#timeoutMs, 'Command'));
    } catch (err) {
      throw wrapRedisError(err);
    }
    if (!Array.isArray(reply)) throw new ScriptReplyError(name, reply);
    return reply as unknown[];
  }
}
