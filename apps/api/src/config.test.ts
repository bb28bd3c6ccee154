import { ConfigError } from '@cq/service-kit';
import { describe, expect, it } from 'vitest';
import { loadApiConfig } from './config.js';

const base = { API_KEYS: 'config-test-key-0123456789' };

describe('IDLE_TIMEOUT_MS', () => {
  it('defaults to 0 (never) and becomes the policy the tokens are issued with', () => {
    expect(loadApiConfig(base).policy.idleTimeoutMs).toBe(0);
    expect(loadApiConfig({ ...base, IDLE_TIMEOUT_MS: '900000' }).policy.idleTimeoutMs).toBe(900_000);
  });

  it('a negative, fractional or non-numeric value, or one over MAX_LIFETIME_MS, stops the start naming the variable', () => {
    for (const value of ['-1', '1.5', 'soon']) {
      const err = (() => {
        try {
          return loadApiConfig({ ...base, IDLE_TIMEOUT_MS: value });
        } catch (caught) {
          return caught;
        }
      })();
      expect(err, value).toBeInstanceOf(ConfigError);
      expect((err as Error).message, value).toMatch(/^IDLE_TIMEOUT_MS /);
    }
    expect(() => loadApiConfig({ ...base, MAX_LIFETIME_MS: '60000', IDLE_TIMEOUT_MS: '60001' })).toThrow(
      /^IDLE_TIMEOUT_MS must be at most MAX_LIFETIME_MS \(60000\)/,
    );
    expect(loadApiConfig({ ...base, MAX_LIFETIME_MS: '60000', IDLE_TIMEOUT_MS: '60000' }).policy.idleTimeoutMs).toBe(
      60_000,
    );
  });
});
