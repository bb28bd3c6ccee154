import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ReplyError, type Cluster, type Redis } from 'ioredis';
import { ScriptReplyError, UnavailableError } from './errors.js';

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
    throw new Error(`Lua scripts not found in ${dir}: pass scriptsDir pointing to the repository's lua/ folder`, { cause });
  }
  const scripts = new Map<string, ScriptSource>();
  for (const name of files) {
    const match = FILE_NAME.exec(name);
    if (match === null) continue;
    const file = join(dir, name);
    scripts.set(match[1]!, { name: match[1]!, numberOfKeys: Number(match[2]), file, lua: expand(file, new Set([file])) });
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

  constructor(redis: RedisClient, scriptsDir?: string) {
    this.#redis = redis;
    this.#sources = scriptsDir === undefined ? (cached ??= loadScripts()) : loadScripts(scriptsDir);
    for (const source of this.#sources.values()) {
      if (typeof (redis as unknown as Record<string, unknown>)[source.name] === 'function') continue;
      redis.defineCommand(source.name, { numberOfKeys: source.numberOfKeys, lua: source.lua });
    }
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
    const fn = (this.#redis as unknown as Record<string, ScriptFunction>)[name]!;
    let reply: unknown;
    try {
      reply = await fn.call(this.#redis, ...keys, ...args);
    } catch (err) {
      throw wrapRedisError(err);
    }
    if (!Array.isArray(reply)) throw new ScriptReplyError(name, reply);
    return reply as unknown[];
  }
}
