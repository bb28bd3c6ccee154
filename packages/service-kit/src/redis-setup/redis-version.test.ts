import { describe, expect, it } from 'vitest';
import { aofReplayChecksDefaultUser, compareRedisVersions, parseRedisVersion } from './redis-version.js';

describe('Redis versions', () => {
  it('parses x.y.z, and nothing else', () => {
    expect(parseRedisVersion('7.0.15')).toEqual([7, 0, 15]);
    expect(parseRedisVersion(' 8.4.4\r')).toEqual([8, 4, 4]);
    expect(parseRedisVersion('255.255.255')).toEqual([255, 255, 255]);
    expect(parseRedisVersion('7.2')).toBeUndefined();
    expect(parseRedisVersion('')).toBeUndefined();
    expect(parseRedisVersion(undefined)).toBeUndefined();
  });

  it('compares by major, then minor, then patch (numerically, not as text)', () => {
    expect(compareRedisVersions([7, 0, 15], [7, 0, 9])).toBeGreaterThan(0);
    expect(compareRedisVersions([7, 10, 0], [7, 9, 99])).toBeGreaterThan(0);
    expect(compareRedisVersions([8, 4, 4], [8, 4, 4])).toBe(0);
    expect(compareRedisVersions([6, 2, 20], [7, 0, 0])).toBeLessThan(0);
  });

  it.each([
    ['6.2.14', false],
    ['7.0.0', true],
    ['7.0.15', true],
    ['7.2.4', true], // Valkey reports this one
    ['7.4.11', true],
    ['8.0.6', true],
    ['8.2.9', true],
    ['8.4.0', true],
    ['8.4.3', true],
    ['8.4.4', false],
    ['8.4.6', false],
    ['8.5.0', true], // no such release: not proven fixed
    ['8.6.0', false],
    ['8.10.1', false],
    ['255.255.255', false], // unstable
  ])('the AOF replay of Redis %s checks the default user: %s', (version, affected) => {
    expect(aofReplayChecksDefaultUser(parseRedisVersion(version))).toBe(affected);
  });

  it('counts an unknown version as affected', () => {
    expect(aofReplayChecksDefaultUser(undefined)).toBe(true);
  });
});
