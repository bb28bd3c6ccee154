import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LeaseField, SessionField, decodeSession } from './records.js';
import { defaultScriptsDir } from './script-loader.js';

/** Every Lua source (includes too), concatenated. */
function allLua(): string {
  const files = [
    ...readdirSync(defaultScriptsDir).filter((f) => f.endsWith('.lua')),
    ...readdirSync(join(defaultScriptsDir, 'includes')).map((f) => `includes/${f}`),
  ];
  return files.map((f) => readFileSync(join(defaultScriptsDir, f), 'utf8')).join('\n');
}

describe('the hash layouts', () => {
  it('names exactly the fields the Lua scripts write', () => {
    const lua = allLua();
    const written = new Set(
      [...lua.matchAll(/'HSET',\s*[\w.]+,([^)]*)\)/g)].flatMap((m) =>
        [...m[1]!.matchAll(/'(\w+)'/g)].map((f) => f[1]!),
      ),
    );
    for (const field of [...Object.values(SessionField), ...Object.values(LeaseField)])
      expect(written, field).toContain(field);
  });

  it('decodes a running session, leaving out what it does not have', () => {
    const flat = [
      'id',
      's-1',
      'user',
      'alice',
      'fence',
      '3',
      'state',
      'running',
      'created',
      '100',
      'pdl',
      '200',
      'life',
      '5000',
    ].concat(['meta', '{"a":1}', 'worker', 'w-1', 'started', '150', 'deadline', '5150', 'leaseExp', '3150']);
    expect(decodeSession('alice', flat)).toEqual({
      sessionId: 's-1',
      userId: 'alice',
      fence: 3,
      state: 'running',
      pool: 'default',
      labels: {},
      createdAt: 100,
      lifetimeMs: 5000,
      metadata: { a: 1 },
      ready: false,
      workerId: 'w-1',
      startedAt: 150,
      deadline: 5150,
      leaseExpiresAt: 3150,
    });
  });

  it('a hash that holds no live session decodes to nothing', () => {
    expect(decodeSession('bob', [])).toBeUndefined();
    expect(decodeSession('bob', ['id', 's-2', 'state', 'completed'])).toBeUndefined();
  });
});
