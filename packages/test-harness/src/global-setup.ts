import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { acquireRedis } from './redis.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of the Redis shared by every test file of the run. */
    redisUrl: string;
  }
}

/** Vitest global setup: one real Redis for the whole run, stopped afterwards. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await acquireRedis();
  project.provide('redisUrl', redis.url);
  return () => redis.stop();
}
