import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { CoordinatorClient } from '@cq/client';
import { Coordinator, type Claim, type EventFeedOptions, type SessionRef } from '@cq/coordinator';
import { createLogger } from '@cq/service-kit';
import { cleanUp, deletePrefix, randomPrefix } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { buildApp, type ApiApp } from '../app.js';
import { loadApiConfig, type ApiConfig } from '../config.js';
import type { Resolver } from '../webhooks/address-guard.js';

/** The key every test API accepts. */
export const TEST_API_KEY = 'test-key-0123456789abcdef';

/** A running API on 127.0.0.1 (random port), with its config, a client, a coordinator view and its log lines. */
export interface TestApi {
  app: ApiApp;
  config: ApiConfig;
  baseUrl: string;
  client: CoordinatorClient;
  /** A coordinator on the same Redis and prefix, to look behind the API. */
  coordinator: Coordinator;
  /** Every JSON log line the API wrote. */
  logs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Starts an API with `env` over the test defaults; it is closed and its keys removed after the file's tests. */
export async function startTestApi(
  env: Record<string, string> = {},
  options: {
    redisUrl?: string;
    sweep?: boolean;
    eventFeed?: EventFeedOptions;
    webhookResolve?: Resolver;
    requestTimeoutMs?: number;
    matchingMaxExamined?: number;
    metricsReadEveryMs?: number;
  } = {},
): Promise<TestApi> {
  const redisUrl = options.redisUrl ?? inject('redisUrl');
  const config = loadApiConfig({
    REDIS_URL: redisUrl,
    KEY_PREFIX: randomPrefix(),
    API_KEYS: TEST_API_KEY,
    LOG_LEVEL: 'info',
    PORT: '0',
    // No worker host runs in these tests: admit beyond capacity unless a test publishes hosts and turns the check on.
    CAPACITY_CHECK: 'false',
    // The tests' Redis keeps nothing on disk (a throwaway): accepted, as the API would refuse it otherwise.
    REDIS_ACCEPT_RISKS: 'no-persistence',
    ...env,
  });
  const logs: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line.trim() !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = createLogger({ level: config.logLevel, name: 'cq-api-test', destination });
  const app = await buildApp({
    config,
    logger,
    sweep: options.sweep ?? false,
    defaultMetrics: false,
    ...(options.eventFeed === undefined ? {} : { eventFeed: options.eventFeed }),
    ...(options.webhookResolve === undefined ? {} : { webhookResolve: options.webhookResolve }),
    ...(options.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: options.requestTimeoutMs }),
    ...(options.matchingMaxExamined === undefined ? {} : { matchingMaxExamined: options.matchingMaxExamined }),
    ...(options.metricsReadEveryMs === undefined ? {} : { metricsReadEveryMs: options.metricsReadEveryMs }),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  const baseUrl = `http://127.0.0.1:${port}`;
  const viewRedis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  viewRedis.on('error', () => {});
  const coordinator = new Coordinator({ redis: viewRedis, keyPrefix: config.keyPrefix, policy: config.policy });
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await app.close();
    if (viewRedis.status === 'ready') await deletePrefix(viewRedis, config.keyPrefix);
    viewRedis.disconnect();
  };
  cleanUp(close);
  apps.set(baseUrl, app);
  return {
    app,
    config,
    baseUrl,
    client: new CoordinatorClient({ baseUrl, apiKey: TEST_API_KEY }),
    coordinator,
    logs,
    close,
  };
}

/** Every test API by its base URL: `send` answers through `app.inject()`, with no socket. */
const apps = new Map<string, ApiApp>();

/**
 * Sends a raw request and returns status, headers and parsed body: through Fastify's `inject()` for a
 * test API of this file (no socket needed), through `fetch` otherwise.
 */
export async function send(
  baseUrl: string,
  method: string,
  path: string,
  options: { body?: string; headers?: Record<string, string> } = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON bodies of every shape, checked field by field
): Promise<{ status: number; headers: Headers; body: any }> {
  const app = apps.get(baseUrl);
  if (app !== undefined) {
    const injected = await app.inject({
      method: method as 'GET',
      url: path,
      headers: options.headers ?? {},
      ...(options.body === undefined ? {} : { payload: options.body }),
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(injected.headers)) {
      if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : String(value));
    }
    return { status: injected.statusCode, headers, body: parsed(injected.body) };
  }
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: options.headers ?? {},
    ...(options.body === undefined ? {} : { body: options.body }),
  });
  return { status: response.status, headers: response.headers, body: parsed(await response.text()) };
}

/** JSON when it parses, else the text. */
function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** JSON request headers, with the test service key unless `auth` is false. */
export function jsonHeaders(auth = true): Record<string, string> {
  return { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${TEST_API_KEY}` } : {}) };
}

/** Claims an admitted session as host `workerId` would (lease 10 s, grace 1 s); throws when it cannot. */
export async function claimAs(
  api: TestApi,
  admitted: SessionRef,
  workerId = 'host-1',
  pool = 'default',
): Promise<Claim> {
  const claimed = await api.coordinator.claims.claim(admitted, { workerId, leaseMs: 10_000, graceMs: 1000, pool });
  if (!claimed.claimed) throw new Error(`not claimed: ${claimed.reason}`);
  return claimed.claim;
}

/** Writes an API_KEYS_FILE of `entries` to a file of its own (removed after the file's tests); its path. */
export function writeKeysFile(entries: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'cq-keys-'));
  const path = join(dir, 'keys.json');
  writeFileSync(path, JSON.stringify(entries), { mode: 0o600 });
  cleanUp(() => rmSync(dir, { recursive: true, force: true }));
  return path;
}
