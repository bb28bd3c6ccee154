import { z } from 'zod';
import { REDIS_RISKS, type RedisRisk } from './redis-setup/findings.js';

/** A configuration value was refused; the message is one line naming the variable and the fix. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Why a listen on an address failed, in a few words, by the error's code. */
const listenFailures: Readonly<Record<string, string>> = {
  EADDRINUSE: 'another process listens there',
  EADDRNOTAVAIL: 'not an address of this machine',
  EACCES: 'a port under 1024 needs privileges',
  ENOTFOUND: 'no such host name',
};

/**
 * The one line for an address this process cannot listen on: `variables` names what sets it (`PORT
 * and HOST`, `PROXY_LISTEN`). Errors other than a refused listen are answered undefined (they are bugs).
 */
export function listenError(variables: string, host: string, port: number, err: unknown): ConfigError | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === undefined || !/^E[A-Z]+$/.test(code)) return undefined;
  const why = listenFailures[code] ?? code;
  return new ConfigError(
    `${variables}: cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port} (${code}: ${why}); ` +
      'pick a free port on an address of this machine',
  );
}

type Env = Readonly<Record<string, string | undefined>>;

/** An integer variable in [min, max], with a default. */
export function intVar(defaultValue: number, min: number, max: number = Number.MAX_SAFE_INTEGER) {
  return integer(min, max, '').transform((value) => value ?? defaultValue);
}

/** An integer variable in [min, max] that may be left unset: undefined when unset or empty. */
export function optionalIntVar(min: number, max: number = Number.MAX_SAFE_INTEGER) {
  return integer(min, max, ', or unset');
}

/** An integer in [min, max], or undefined when unset; `unset` ends the message for a bad value. */
function integer(min: number, max: number, unset: string) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): number | undefined => {
      if (raw === undefined || raw.trim() === '') return undefined;
      const value = Number(raw.trim());
      if (!/^-?\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
        ctx.addIssue({ code: 'custom', message: `must be an integer from ${min} to ${max}${unset} (got "${raw}")` });
        return z.NEVER;
      }
      return value;
    });
}

/** One of `values`, with a default. */
export function choiceVar<const T extends string>(defaultValue: T, values: readonly T[]) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): T => {
      const value = raw === undefined || raw.trim() === '' ? defaultValue : raw.trim();
      if (!(values as readonly string[]).includes(value)) {
        const list = `${values.slice(0, -1).join(', ')} or ${values.at(-1)!}`;
        ctx.addIssue({ code: 'custom', message: `must be ${list} (got "${raw}")` });
        return z.NEVER;
      }
      return value as T;
    });
}

/** A decimal number in [min, max] with at most `places` decimal places that may be left unset. */
export function optionalDecimalVar(min: number, max: number, places: number) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): number | undefined => {
      if (raw === undefined || raw.trim() === '') return undefined;
      const value = Number(raw.trim());
      if (!new RegExp(`^\\d+(\\.\\d{1,${places}})?$`).test(raw.trim()) || value < min || value > max) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a number from ${min} to ${max} with at most ${places} decimals, or unset (got "${raw}")`,
        });
        return z.NEVER;
      }
      return value;
    });
}

/** An absolute path, with a default. */
export function pathVar(defaultValue: string) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): string => {
      if (raw === undefined || raw.trim() === '') return defaultValue;
      const value = raw.trim().replace(/(.)\/+$/, '$1');
      if (!value.startsWith('/') || value.includes('\0')) {
        ctx.addIssue({ code: 'custom', message: `must be an absolute path (got "${raw}")` });
        return z.NEVER;
      }
      return value;
    });
}

/** A string variable matching `pattern`, with a default. */
export function stringVar(defaultValue: string, pattern: RegExp, what: string) {
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw.trim() === '') return defaultValue;
      if (!pattern.test(raw.trim())) {
        ctx.addIssue({ code: 'custom', message: `must be ${what} (got "${raw}")` });
        return z.NEVER;
      }
      return raw.trim();
    });
}

/** A Redis URL: `redis://` or `rediss://` (TLS), user and password allowed. */
export function redisUrlVar(defaultValue: string) {
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const value = raw === undefined || raw.trim() === '' ? defaultValue : raw.trim();
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        ctx.addIssue({
          code: 'custom',
          message: 'must be a URL such as redis://127.0.0.1:6379 or rediss://user:password@host:6380',
        });
        return z.NEVER;
      }
      if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
        ctx.addIssue({ code: 'custom', message: `must start with redis:// or rediss:// (got ${url.protocol}//)` });
        return z.NEVER;
      }
      return value;
    });
}

/** `PROXY_SECRET`: undefined when unset (no session proxy), else at least 32 characters, never echoed. */
export function proxySecretVar() {
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw.trim() === '') return undefined;
      if (raw.trim().length < 32) {
        ctx.addIssue({
          code: 'custom',
          message: `must be at least 32 characters (got ${raw.trim().length}; e.g. openssl rand -hex 32)`,
        });
        return z.NEVER;
      }
      return raw.trim();
    });
}

/** `host:port` (port 0 allowed: any free one), or `defaultValue` when unset. */
export function hostPortVar(defaultValue: string | undefined, allowPortZero: boolean) {
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const value = raw === undefined || raw.trim() === '' ? defaultValue : raw.trim();
      if (value === undefined) return undefined;
      const match = /^([^:\s]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(value);
      const port = Number(match?.[2]);
      if (match === null || port > 65535 || port < (allowPortZero ? 0 : 1)) {
        ctx.addIssue({ code: 'custom', message: `must be host:port (got "${value}")` });
        return z.NEVER;
      }
      return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
    });
}

/** `host:port,host:port,...`, or undefined when unset. */
export function nodeListVar() {
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw.trim() === '') return undefined;
      const nodes = raw.split(',').map((part) => part.trim());
      const parsed: Array<{ host: string; port: number }> = [];
      for (const node of nodes) {
        const match = /^([^:\s]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$/.exec(node);
        const port = Number(match?.[2]);
        if (match === null || port < 1 || port > 65535) {
          ctx.addIssue({ code: 'custom', message: `must be host:port,host:port,... (got "${node}")` });
          return z.NEVER;
        }
        parsed.push({ host: match[1]!.replace(/^\[|\]$/g, ''), port });
      }
      return parsed;
    });
}

/**
 * `REDIS_ACCEPT_RISKS`: a comma-separated list of {@link REDIS_RISKS}, the Redis setups that may lose
 * writes and are to be accepted rather than refused at start; empty when unset.
 */
export function redisRisksVar() {
  return z
    .string()
    .optional()
    .transform((raw, ctx): ReadonlySet<RedisRisk> => {
      const words = (raw ?? '')
        .split(',')
        .map((w) => w.trim())
        .filter((w) => w !== '');
      const unknown = words.find((w) => !(REDIS_RISKS as readonly string[]).includes(w));
      if (unknown !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a comma-separated list of ${REDIS_RISKS.join(', ')} (got "${unknown}")`,
        });
        return z.NEVER;
      }
      return new Set(words as RedisRisk[]);
    });
}

/** The log levels pino knows. */
export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Variables both processes read (see the contract's configuration table). */
export const commonEnvShape = {
  REDIS_URL: redisUrlVar('redis://127.0.0.1:6379'),
  REDIS_CLUSTER_NODES: nodeListVar(),
  KEY_PREFIX: stringVar('cq', /^[A-Za-z0-9._:@-]{1,64}$/, '1 to 64 characters of A-Z a-z 0-9 . _ : @ - (no braces)'),
  LOG_LEVEL: stringVar('info', new RegExp(`^(${logLevels.join('|')})$`), `one of ${logLevels.join(', ')}`),
  REDIS_WAIT_REPLICAS: intVar(0, 0, 16),
  REDIS_WAIT_TIMEOUT_MS: intVar(100, 1, 500),
  SPAWN_QUEUE_SHARDS: intVar(1, 1, 64),
  REDIS_ACCEPT_RISKS: redisRisksVar(),
};

/** The parsed common variables. */
export type CommonConfig = {
  redisUrl: string;
  redisClusterNodes: Array<{ host: string; port: number }> | undefined;
  keyPrefix: string;
  logLevel: (typeof logLevels)[number];
  redisWaitReplicas: number;
  /** Longest wait for `redisWaitReplicas` acknowledgements, ms. */
  redisWaitTimeoutMs: number;
  /** Number of spawn-queue shards (BullMQ queues); users are mapped to them by hash slot. */
  spawnQueueShards: number;
  /**
   * `REDIS_ACCEPT_RISKS`: the ways Redis may be set up to lose writes that the process is to start with
   * anyway (each logged as a warning at every start) rather than refuse. @defaultValue none
   */
  redisAcceptRisks: ReadonlySet<RedisRisk>;
};

/**
 * Parses `env` with a zod object of variables. Throws one {@link ConfigError} whose message is a
 * single line naming the first variable that is wrong and what it must be.
 */
export function parseEnv<S extends z.ZodRawShape>(shape: S, env: Env): z.output<z.ZodObject<S>> {
  const result = z.object(shape).safeParse(env);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const variable = String(issue.path[0] ?? 'configuration');
  throw new ConfigError(`${variable} ${issue.message}`);
}

/** Turns parsed common variables into {@link CommonConfig}. */
export function commonConfig(parsed: z.output<z.ZodObject<typeof commonEnvShape>>): CommonConfig {
  return {
    redisUrl: parsed.REDIS_URL,
    redisClusterNodes: parsed.REDIS_CLUSTER_NODES,
    keyPrefix: parsed.KEY_PREFIX,
    logLevel: parsed.LOG_LEVEL as CommonConfig['logLevel'],
    redisWaitReplicas: parsed.REDIS_WAIT_REPLICAS,
    redisWaitTimeoutMs: parsed.REDIS_WAIT_TIMEOUT_MS,
    spawnQueueShards: parsed.SPAWN_QUEUE_SHARDS,
    redisAcceptRisks: parsed.REDIS_ACCEPT_RISKS,
  };
}
