import { MAX_METADATA_BYTES, MAX_TOKEN_TTL_MS } from '@cq/contract';
import { assertInteger } from './validate.js';

/** The rules the coordinator enforces. Every duration is in milliseconds. */
export interface Policy {
  /**
   * Default life of an unused spawn token.
   * @defaultValue 900000 (15 minutes)
   */
  tokenTtlMs: number;
  /**
   * Most tokens issued per user per {@link Policy.tokenWindowMs} (sliding window).
   * @defaultValue 10
   */
  tokenLimit: number;
  /**
   * The token-issuing window.
   * @defaultValue 60000
   */
  tokenWindowMs: number;
  /**
   * Spawn throttle (GCRA): one admission per interval once the burst is used.
   * @defaultValue 10000
   */
  spawnIntervalMs: number;
  /**
   * Spawn throttle (GCRA): admissions allowed at once.
   * @defaultValue 1
   */
  spawnBurst: number;
  /**
   * Cap on a session's lifetime; a token may ask for less, never more.
   * @defaultValue 3600000 (1 hour)
   */
  maxLifetimeMs: number;
  /**
   * How long an admitted session may wait for a worker before it ends as `lost`.
   * @defaultValue 60000
   */
  pendingTimeoutMs: number;
  /**
   * Idle timeout of a session whose token sets none: stopped (reason `idle`) after this long without
   * activity; 0: never. Applied when the token is issued. At most {@link Policy.maxLifetimeMs}.
   * @defaultValue 0 (never)
   */
  idleTimeoutMs: number;
  /**
   * Ended sessions kept in each user's history.
   * @defaultValue 50
   */
  historyLength: number;
}

/** Every default in one place. */
export const defaultPolicy: Readonly<Policy> = Object.freeze({
  tokenTtlMs: 900_000,
  tokenLimit: 10,
  tokenWindowMs: 60_000,
  spawnIntervalMs: 10_000,
  spawnBurst: 1,
  maxLifetimeMs: 3_600_000,
  pendingTimeoutMs: 60_000,
  idleTimeoutMs: 0,
  historyLength: 50,
});

// The token limits are the contract's.
export { MAX_METADATA_BYTES, MAX_TOKEN_TTL_MS };

/** Merges `overrides` over the defaults and checks every value. */
export function resolvePolicy(overrides: Partial<Policy> = {}): Policy {
  const policy: Policy = { ...defaultPolicy };
  for (const [name, value] of Object.entries(overrides) as Array<[keyof Policy, number | undefined]>) {
    if (value !== undefined) policy[name] = value;
  }
  assertInteger(policy.tokenTtlMs, 'tokenTtlMs', 1, MAX_TOKEN_TTL_MS);
  assertInteger(policy.tokenLimit, 'tokenLimit', 1);
  assertInteger(policy.tokenWindowMs, 'tokenWindowMs', 1);
  assertInteger(policy.spawnIntervalMs, 'spawnIntervalMs', 1);
  assertInteger(policy.spawnBurst, 'spawnBurst', 1);
  assertInteger(policy.maxLifetimeMs, 'maxLifetimeMs', 1);
  assertInteger(policy.pendingTimeoutMs, 'pendingTimeoutMs', 1);
  assertInteger(policy.idleTimeoutMs, 'idleTimeoutMs', 0, policy.maxLifetimeMs);
  assertInteger(policy.historyLength, 'historyLength', 1, 10_000);
  return policy;
}
