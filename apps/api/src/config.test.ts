import { ConfigError } from '@cq/service-kit';
import { describe, expect, it } from 'vitest';
import { loadApiConfig } from './config.js';
import { openFileLimit } from './connection-limits.js';

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

describe('MAX_CONNECTIONS', () => {
  it('defaults to the open-file limit less the 128 descriptors the API keeps, at most 10,000', () => {
    expect(loadApiConfig(base, 1024).maxConnections).toBe(896);
    expect(loadApiConfig(base, 1_048_576).maxConnections).toBe(10_000);
    expect(loadApiConfig(base, undefined).maxConnections).toBe(10_000);
  });

  it('takes a value within the limit, and stops the start naming the fix for one beyond it or a limit too low', () => {
    expect(loadApiConfig({ ...base, MAX_CONNECTIONS: '500' }, 1024).maxConnections).toBe(500);
    expect(() => loadApiConfig({ ...base, MAX_CONNECTIONS: '1000' }, 1024)).toThrow(
      /^MAX_CONNECTIONS \(1000\) must be at most the open-file limit \(1024\) less the 128 descriptors the API keeps for itself \(896\): raise the limit \(ulimit -n\) or lower MAX_CONNECTIONS$/,
    );
    expect(() => loadApiConfig(base, 140)).toThrow(/^the open-file limit \(140\) leaves fewer than 16 connections/);
    expect(() => loadApiConfig({ ...base, MAX_CONNECTIONS: '3' }, 1024)).toThrow(
      /^MAX_CONNECTIONS must be an integer from 16/,
    );
  });

  it('reads the soft open-file limit from /proc/self/limits', () => {
    const limits =
      'Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n';
    expect(openFileLimit(() => limits)).toBe(1024);
    expect(openFileLimit(() => limits.replace('1024   ', 'unlimited'))).toBeUndefined();
    expect(
      openFileLimit(() => {
        throw new Error('ENOENT');
      }),
    ).toBeUndefined();
  });
});
