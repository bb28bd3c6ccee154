import type { TestProject } from 'vitest/node';
import './provided.js';
import { acquireRedis } from './redis.js';

/** Vitest global setup: one real Redis for the whole run, stopped afterwards. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await acquireRedis();
  project.provide('redisUrl', redis.url);
  return () => redis.stop();
}
