import type { Keys } from './keys.js';
import type { RedisClient } from './redis-errors.js';
import type { Scripts } from './script-runner.js';

/** What every part of the coordinator shares: the client, its scripts and the key builder. */
export interface Context {
  readonly redis: RedisClient;
  readonly scripts: Scripts;
  readonly keys: Keys;
}
