import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadWorkerConfig } from './config.js';

describe('worker configuration', () => {
  it('has the contract defaults', () => {
    expect(loadWorkerConfig({})).toMatchObject({
      slots: 4,
      leaseMs: 15_000,
      sessionCommand: undefined,
      sessionGraceMs: 5000,
      workerId: `${hostname()}:${process.pid}`,
      pool: 'default',
      redisUrl: 'redis://127.0.0.1:6379',
      keyPrefix: 'cq',
      sessionContainment: 'auto',
      sessionMemoryMb: undefined,
      sessionPidsMax: undefined,
      sessionUser: undefined,
      logRateBytes: 65_536,
      sessionNetwork: 'auto',
      sessionCpus: undefined,
      sessionTmpMb: 256,
      sessionsDir: join(tmpdir(), 'cq-sessions'),
    });
  });

  it('reads the isolation variables', () => {
    expect(
      loadWorkerConfig({
        SESSION_NETWORK: 'egress',
        SESSION_CPUS: '0.25',
        SESSION_TMP_MB: '64',
        SESSIONS_DIR: '/srv/cq/',
      }),
    ).toMatchObject({ sessionNetwork: 'egress', sessionCpus: 0.25, sessionTmpMb: 64, sessionsDir: '/srv/cq' });
  });

  it.each([
    [{ SLOTS: '0' }, /^SLOTS must be an integer from 1 to 1000 \(got "0"\)$/],
    [{ LEASE_MS: 'soon' }, /^LEASE_MS must be an integer/],
    [{ WORKER_ID: 'has space' }, /^WORKER_ID must be 1 to 128 characters/],
    [{ POOL: 'GPU' }, /^POOL must be 1 to 64 characters of a-z 0-9 -/],
    [{ SESSION_CONTAINMENT: 'vm' }, /^SESSION_CONTAINMENT must be auto, namespace or group \(got "vm"\)$/],
    [{ SESSION_MEMORY_MB: '8' }, /^SESSION_MEMORY_MB must be an integer from 16 to 1048576, or unset/],
    [{ SESSION_PIDS_MAX: 'many' }, /^SESSION_PIDS_MAX must be an integer from 4 to/],
    [{ SESSION_USER: 'rm -rf' }, /^SESSION_USER must be a user name or a numeric uid/],
    [{ SESSION_NETWORK: 'open' }, /^SESSION_NETWORK must be auto, none, egress or host \(got "open"\)$/],
    [{ SESSION_CPUS: '0' }, /^SESSION_CPUS must be a number from 0.01 to 1024 with at most 2 decimals, or unset/],
    [{ SESSION_CPUS: '1.125' }, /^SESSION_CPUS must be a number/],
    [{ SESSION_CPUS: '-1' }, /^SESSION_CPUS must be a number/],
    [{ SESSION_TMP_MB: '0' }, /^SESSION_TMP_MB must be an integer from 1 to/],
    [{ SESSIONS_DIR: 'relative/dir' }, /^SESSIONS_DIR must be an absolute path \(got "relative\/dir"\)$/],
  ])('refuses %o naming the variable', (env, message) => {
    expect(() => loadWorkerConfig(env)).toThrow(message);
  });
});
