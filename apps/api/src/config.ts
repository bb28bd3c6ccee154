import {
  ConfigError,
  commonConfig,
  commonEnvShape,
  intVar,
  optionalIntVar,
  parseEnv,
  proxySecretVar,
  stringVar,
  type CommonConfig,
} from '@cq/service-kit';
import { MAX_TOKEN_TTL_MS, defaultPolicy, type Policy } from '@cq/coordinator';
import { z } from 'zod';
import { KeyRing, readKeysFile, type KeyEntry } from './access.js';
import { MIN_CONNECTIONS, connectionBound, openFileLimit } from './connection-limits.js';

/** The API's configuration, parsed once from the environment at start-up. */
export interface ApiConfig extends CommonConfig {
  /** Where to listen. @defaultValue '127.0.0.1' */
  host: string;
  /** Port to listen on. @defaultValue 3000 */
  port: number;
  /** The keys of API_KEYS (each with every scope; may be empty when API_KEYS_FILE is set). */
  apiKeys: string[];
  /**
   * Every key the API takes, named and scoped: API_KEYS' (`key-1`, `key-2`, …, every scope), then
   * API_KEYS_FILE's. Clients send `Authorization: Bearer <key>`. At least one.
   */
  keys: readonly KeyEntry[];
  /**
   * Coordinator policy: TOKEN_TTL_MS, TOKEN_LIMIT, TOKEN_WINDOW_MS, SPAWN_INTERVAL_MS, SPAWN_BURST,
   * MAX_LIFETIME_MS, PENDING_TIMEOUT_MS, IDLE_TIMEOUT_MS (the idle timeout of a session whose token
   * sets none, ms; 0: never; at most MAX_LIFETIME_MS; @defaultValue 0).
   */
  policy: Policy;
  /** Milliseconds between sweeps for overdue sessions. @defaultValue 5000 */
  sweepIntervalMs: number;
  /** Whether the dashboard's queue actions (retry, remove, ...) are enabled. @defaultValue false */
  dashboardActions: boolean;
  /** Trust `X-Forwarded-For` from a proxy in front of the API for the client address. @defaultValue false */
  trustProxy: boolean;
  /**
   * Shed load: while the event loop lags more than this, answer `503 unavailable` with `Retry-After: 1`
   * (whoever sends the requests); 0 turns it off. @defaultValue 1000
   */
  maxEventLoopDelayMs: number;
  /**
   * Refuse a spawn with `503 no_capacity` when no worker slot is free; false admits beyond capacity
   * (for pools that autoscale on queue length). @defaultValue true
   */
  capacityCheck: boolean;
  /**
   * Most client connections open at once; a connection over it is accepted and closed at once, so no
   * number of clients can take the descriptors the process needs. @defaultValue the open-file limit
   * less 128, at most 10,000
   */
  maxConnections: number;
  /**
   * How long a connection may stay open with no request after its last answer, ms (an answer to a
   * request without a valid key closes its connection at once). @defaultValue 5000
   */
  keepAliveTimeoutMs: number;
  /** Allow webhook URLs that resolve to loopback, private or link-local addresses. @defaultValue false */
  webhookAllowPrivate: boolean;
  /**
   * The key webhook secrets are sealed with in Redis (AES-256-GCM, the key derived from this with
   * HKDF-SHA256). Unset: derived from API_KEYS, so changing API_KEYS then makes existing secrets
   * unreadable (their deliveries fail, logged); set it to rotate service keys freely.
   */
  webhookSecretKey: string | undefined;
  /** The session proxy (PROXY_*); undefined without PROXY_SECRET: its routes answer `503 proxy_not_configured`. */
  proxy: ProxyConfig | undefined;
  /** FILES_MAX_MB: the largest file put into a session, bytes. @defaultValue 512 MiB */
  filesMaxBytes: number;
}

/** The session proxy's settings (the contract's "The session proxy"). */
export interface ProxyConfig {
  /** PROXY_SECRET: shared with every worker host of the deployment. */
  readonly secret: string;
  /**
   * PROXY_DOMAIN: sessions are served on `<port>-<sessionId>.<domain>`; undefined: `localhost:<the port
   * the API listens on>` (PORT, or the one the system gave for PORT=0).
   */
  readonly domain: string | undefined;
  /** PROXY_MAX_CONNECTIONS: open proxied connections of one session through this process. @defaultValue 256 */
  readonly maxConnections: number;
  /** PROXY_TLS: the session origins are https (TLS terminated in front of the API). @defaultValue false */
  readonly tls: boolean;
}

const apiKeysVar = z
  .string()
  .optional()
  .transform((raw, ctx) => {
    if (raw === undefined || raw === '') return [];
    const keys = raw
      .split(',')
      .map((k) => k.trim())
      .filter((k) => k !== '');
    if (keys.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'is empty: set at least one key' });
      return z.NEVER;
    }
    const short = keys.find((k) => k.length < 16);
    if (short !== undefined) {
      ctx.addIssue({
        code: 'custom',
        message: 'holds a key shorter than 16 characters: use long random keys (e.g. openssl rand -hex 24)',
      });
      return z.NEVER;
    }
    return keys;
  });

const apiEnvShape = {
  ...commonEnvShape,
  HOST: stringVar('127.0.0.1', /^[A-Za-z0-9.:[\]-]{1,255}$/, 'a host name or IP address'),
  PORT: intVar(3000, 0, 65535),
  API_KEYS: apiKeysVar,
  API_KEYS_FILE: z.string().optional(),
  TOKEN_TTL_MS: intVar(defaultPolicy.tokenTtlMs, 1, MAX_TOKEN_TTL_MS),
  TOKEN_LIMIT: intVar(defaultPolicy.tokenLimit, 1, 1_000_000),
  TOKEN_WINDOW_MS: intVar(defaultPolicy.tokenWindowMs, 1, 30 * 24 * 3_600_000),
  SPAWN_INTERVAL_MS: intVar(defaultPolicy.spawnIntervalMs, 1, 30 * 24 * 3_600_000),
  SPAWN_BURST: intVar(defaultPolicy.spawnBurst, 1, 1_000_000),
  MAX_LIFETIME_MS: intVar(defaultPolicy.maxLifetimeMs, 1, 365 * 24 * 3_600_000),
  PENDING_TIMEOUT_MS: intVar(defaultPolicy.pendingTimeoutMs, 1, 30 * 24 * 3_600_000),
  IDLE_TIMEOUT_MS: intVar(defaultPolicy.idleTimeoutMs, 0, 365 * 24 * 3_600_000),
  SWEEP_INTERVAL_MS: intVar(5000, 100, 3_600_000),
  DASHBOARD_ACTIONS: stringVar('false', /^(true|false)$/, 'true or false'),
  TRUST_PROXY: stringVar('false', /^(true|false)$/, 'true or false'),
  CAPACITY_CHECK: stringVar('true', /^(true|false)$/, 'true or false'),
  MAX_EVENT_LOOP_DELAY_MS: intVar(1000, 0, 60_000),
  MAX_CONNECTIONS: optionalIntVar(MIN_CONNECTIONS, 1_000_000),
  KEEP_ALIVE_TIMEOUT_MS: intVar(5000, 1, 600_000),
  WEBHOOK_ALLOW_PRIVATE: stringVar('false', /^(true|false)$/, 'true or false'),
  PROXY_SECRET: proxySecretVar(),
  PROXY_DOMAIN: stringVar(
    '',
    /^[a-z0-9.-]{1,200}(:\d{1,5})?$/,
    'a domain, with a port if not the default (e.g. sessions.example.com or localhost:3000)',
  ),
  PROXY_MAX_CONNECTIONS: intVar(256, 1, 1_000_000),
  PROXY_TLS: stringVar('false', /^(true|false)$/, 'true or false'),
  FILES_MAX_MB: intVar(512, 1, 1_048_576),
  WEBHOOK_SECRET_KEY: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw === '') return undefined;
      if (raw.length < 16) {
        ctx.addIssue({ code: 'custom', message: 'must be at least 16 characters' });
        return z.NEVER;
      }
      return raw;
    }),
};

/**
 * Parses the API's environment; throws a one-line ConfigError naming the first bad variable.
 * `fileLimit` is the process's open-file limit, which bounds MAX_CONNECTIONS (tests pass their own).
 */
export function loadApiConfig(
  env: Readonly<Record<string, string | undefined>>,
  fileLimit: number | undefined = openFileLimit(),
): ApiConfig {
  const parsed = parseEnv(apiEnvShape, env);
  if (parsed.IDLE_TIMEOUT_MS > parsed.MAX_LIFETIME_MS)
    throw new ConfigError(
      `IDLE_TIMEOUT_MS must be at most MAX_LIFETIME_MS (${parsed.MAX_LIFETIME_MS}): a session never runs longer than that`,
    );
  if (parsed.API_KEYS.length === 0 && (parsed.API_KEYS_FILE ?? '') === '')
    throw new ConfigError(
      'API_KEYS is not set: set it to one or more comma-separated service keys, or API_KEYS_FILE to a file of named, scoped keys',
    );
  const serviceKeys = KeyRing.fromServiceKeys(parsed.API_KEYS);
  const keys = [
    ...serviceKeys,
    ...((parsed.API_KEYS_FILE ?? '') === '' ? [] : readKeysFile(parsed.API_KEYS_FILE!, serviceKeys)),
  ];
  const connections = connectionBound(parsed.MAX_CONNECTIONS, fileLimit);
  if ('problem' in connections) throw new ConfigError(connections.problem);
  return {
    ...commonConfig(parsed),
    host: parsed.HOST,
    port: parsed.PORT,
    apiKeys: parsed.API_KEYS,
    keys,
    policy: {
      tokenTtlMs: parsed.TOKEN_TTL_MS,
      tokenLimit: parsed.TOKEN_LIMIT,
      tokenWindowMs: parsed.TOKEN_WINDOW_MS,
      spawnIntervalMs: parsed.SPAWN_INTERVAL_MS,
      spawnBurst: parsed.SPAWN_BURST,
      maxLifetimeMs: parsed.MAX_LIFETIME_MS,
      pendingTimeoutMs: parsed.PENDING_TIMEOUT_MS,
      idleTimeoutMs: parsed.IDLE_TIMEOUT_MS,
      historyLength: defaultPolicy.historyLength,
    },
    sweepIntervalMs: parsed.SWEEP_INTERVAL_MS,
    dashboardActions: parsed.DASHBOARD_ACTIONS === 'true',
    trustProxy: parsed.TRUST_PROXY === 'true',
    capacityCheck: parsed.CAPACITY_CHECK === 'true',
    maxEventLoopDelayMs: parsed.MAX_EVENT_LOOP_DELAY_MS,
    maxConnections: connections.bound,
    keepAliveTimeoutMs: parsed.KEEP_ALIVE_TIMEOUT_MS,
    webhookAllowPrivate: parsed.WEBHOOK_ALLOW_PRIVATE === 'true',
    webhookSecretKey: parsed.WEBHOOK_SECRET_KEY,
    filesMaxBytes: parsed.FILES_MAX_MB * 1024 * 1024,
    proxy:
      parsed.PROXY_SECRET === undefined
        ? undefined
        : {
            secret: parsed.PROXY_SECRET,
            domain: parsed.PROXY_DOMAIN === '' ? undefined : parsed.PROXY_DOMAIN.toLowerCase(),
            maxConnections: parsed.PROXY_MAX_CONNECTIONS,
            tls: parsed.PROXY_TLS === 'true',
          },
  };
}
