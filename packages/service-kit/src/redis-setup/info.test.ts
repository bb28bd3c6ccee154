import { describe, expect, it } from 'vitest';
import { infoFacts, parseInfo } from './info.js';

const INFO_7_0_15 = [
  '# Server',
  'redis_version:7.0.15',
  'redis_git_sha1:00000000',
  'redis_mode:standalone',
  '',
  '# Memory',
  'used_memory:1038680',
  'maxmemory:0',
  'maxmemory_policy:noeviction',
  '',
  '# Persistence',
  'loading:0',
  'rdb_changes_since_last_save:0',
  'aof_enabled:1',
  'aof_rewrite_in_progress:0',
  '',
].join('\r\n');

describe('INFO', () => {
  it('reads field:value lines, leaving out headers and blank lines, values kept whole', () => {
    const fields = parseInfo(
      '# Server\r\nredis_version:7.0.15\r\n\r\nexecutable:/usr/bin/redis-server\r\nos:Linux 6.1 x86_64\r\n',
    );
    expect([...fields]).toEqual([
      ['redis_version', '7.0.15'],
      ['executable', '/usr/bin/redis-server'],
      ['os', 'Linux 6.1 x86_64'],
    ]);
  });

  it('gives the version, AOF and the eviction policy', () => {
    expect(infoFacts(INFO_7_0_15)).toEqual({
      version: [7, 0, 15],
      versionText: '7.0.15',
      valkeyVersion: undefined,
      aofEnabled: true,
      maxmemoryPolicy: 'noeviction',
    });
  });

  it('tells AOF off from a field that is absent, and names Valkey', () => {
    const facts = infoFacts('redis_version:7.2.4\nvalkey_version:8.1.1\naof_enabled:0\nmaxmemory_policy:allkeys-lru\n');
    expect(facts.aofEnabled).toBe(false);
    expect(facts.valkeyVersion).toBe('8.1.1');
    expect(facts.maxmemoryPolicy).toBe('allkeys-lru');
    expect(infoFacts('redis_version:5.0.0\n').aofEnabled).toBeUndefined();
    expect(infoFacts('').versionText).toBe('unknown');
  });
});
