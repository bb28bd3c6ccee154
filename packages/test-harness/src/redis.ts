import { existsSync } from 'node:fs';
import { startRedisServer } from './redis-server.js';

/** A Redis the tests may use, and how to let go of it. */
export interface TestRedis {
  readonly url: string;
  /** Where it came from: `REDIS_URL`, a testcontainers container, or a local `redis-server`. */
  readonly source: 'env' | 'testcontainers' | 'local';
  stop(): Promise<void>;
}

function dockerMayAnswer(): boolean {
  return process.env['DOCKER_HOST'] !== undefined || existsSync('/var/run/docker.sock');
}

async function fromTestcontainers(): Promise<TestRedis | undefined> {
  if (!dockerMayAnswer()) return undefined;
  try {
    const { RedisContainer } = await import('@testcontainers/redis');
    const container = await new RedisContainer('redis:7-alpine').start();
    return {
      url: container.getConnectionUrl(),
      source: 'testcontainers',
      stop: async () => void (await container.stop()),
    };
  } catch {
    // No engine behind the socket: fall through to the local binary.
    return undefined;
  }
}

/**
 * Gives the test run a real Redis, in this order: `REDIS_URL` when set; a testcontainers Redis when a
 * Docker engine answers; otherwise the local `redis-server` binary on a free port, removed by `stop()`.
 * Throws one clear error when none of them can be had.
 */
export async function acquireRedis(): Promise<TestRedis> {
  const fromEnv = process.env['REDIS_URL'];
  if (fromEnv !== undefined && fromEnv !== '') return { url: fromEnv, source: 'env', stop: async () => {} };
  const container = await fromTestcontainers();
  if (container !== undefined) return container;
  const server = await startRedisServer();
  return { url: server.url, source: 'local', stop: () => server.stop() };
}
