import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultScriptsDir } from '@cq/coordinator';
import { startRedisServer, type RedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REDIS_COMMANDS, aclRules, probeCalls, probeNames } from './redis-commands.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

/** Every `.lua` file under `dir`, read. */
function luaUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.lua'))
    .map((f) => readFileSync(join(dir, f), 'utf8'));
}

/** BullMQ's scripts, as the spawn queues load them. */
function bullmqScripts(): string[] {
  const require = createRequire(join(ROOT, 'packages/spawn-handoff/package.json'));
  return luaUnder(join(dirname(require.resolve('bullmq/package.json')), 'dist/esm/commands'));
}

let server: RedisServer;
let redis: Redis;
/** Redis's own command names (lower case), subcommands as `name|sub`. */
let known: Set<string>;

beforeAll(async () => {
  server = await startRedisServer();
  redis = new Redis(server.url);
  const names = (await redis.call('COMMAND', 'LIST')) as string[];
  known = new Set(names.map((n) => n.toLowerCase()));
});

afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

/** Quoted upper-case words of `scripts` that are Redis commands: every command they may call, named or chosen. */
function commandsNamedIn(scripts: string[]): string[] {
  const words = new Set(
    scripts.flatMap((s) => [...s.matchAll(/["']([A-Z]{2,})["']/g)].map((m) => m[1]!.toLowerCase())),
  );
  return [...words].filter((w) => known.has(w)).sort();
}

describe('the commands the processes run', () => {
  const table = new Map(REDIS_COMMANDS.map((c) => [c.name, c]));

  it('names each command once', () => {
    expect(table.size).toBe(REDIS_COMMANDS.length);
  });

  it('holds every command our scripts in lua/ name, as theirs', () => {
    const named = commandsNamedIn(luaUnder(defaultScriptsDir)).map((c) => (c === 'cluster' ? 'cluster|myid' : c));
    expect(named.length).toBeGreaterThan(20);
    for (const name of named) expect(table.get(name)?.by, name).toContain('scripts');
    // And nothing is said to be theirs that they do not name.
    const theirs = REDIS_COMMANDS.filter((c) => c.by.includes('scripts')).map((c) => c.name);
    expect(theirs.sort()).toEqual([...named].sort());
  });

  it("holds every command BullMQ's scripts name (the ones they pick at run time included)", () => {
    const named = commandsNamedIn(bullmqScripts());
    expect(named).toEqual(expect.arrayContaining(['scard', 'hlen', 'sscan', 'hscan', 'lpush', 'rpush']));
    for (const name of named) expect(table.get(name)?.by, name).toContain('bullmq');
  });

  it('marks as writes exactly the commands Redis flags write (those the AOF replays)', async () => {
    for (const command of REDIS_COMMANDS) {
      const [name, sub] = command.name.split('|');
      const [info] = (await redis.call('COMMAND', 'INFO', sub === undefined ? name! : `${name}|${sub}`)) as Array<
        [string, number, string[]] | null
      >;
      expect(info, `${command.name} is a command of this Redis`).not.toBeNull();
      expect(info![2].includes('write'), command.name).toBe(command.write);
    }
  });

  it('builds an ACL Redis 7.0 accepts, which allows every probe call and no other key or channel', async () => {
    const rules = aclRules('cq');
    expect(rules).toMatch(/^resetkeys ~cq:\* resetchannels &cq:\* -@all \+get \+set /);
    await redis.call('ACL', 'SETUSER', 'cq-test', 'on', '>pw', ...rules.split(' '));
    const { key, key2, channel } = probeNames('cq');
    for (const command of REDIS_COMMANDS) {
      const argv = [...command.name.split('|'), ...command.args(key, key2, channel)];
      const answer = String(await redis.call('ACL', 'DRYRUN', 'cq-test', ...argv));
      expect(answer, argv.join(' ')).toBe('OK');
    }
    // The check queues every call but its own transaction's and the subscriptions it makes for real.
    expect(probeCalls('cq').map((c) => c.command.name)).toEqual(
      REDIS_COMMANDS.filter((c) => !['multi', 'exec', 'discard', 'subscribe', 'unsubscribe'].includes(c.name)).map(
        (c) => c.name,
      ),
    );
    expect(String(await redis.call('ACL', 'DRYRUN', 'cq-test', 'GET', 'other:key'))).toMatch(
      /no permissions to access/,
    );
    expect(String(await redis.call('ACL', 'DRYRUN', 'cq-test', 'FLUSHALL'))).toMatch(/no permissions to run/);
    expect(String(await redis.call('ACL', 'DRYRUN', 'cq-test', 'CONFIG', 'GET', 'requirepass'))).toMatch(
      /no permissions/,
    );
  });

  it('is what docs/redis-setup.md gives: the ACL line, and each command in its table once', () => {
    const doc = readFileSync(join(ROOT, 'docs/redis-setup.md'), 'utf8');
    expect(doc).toContain(`user cq on >CHANGE-ME-a-long-random-password ${aclRules('cq')}\n`);
    const section = doc.slice(
      doc.indexOf('## The ACL, command by command'),
      doc.indexOf('## What the processes check'),
    );
    const listed = [...section.matchAll(/^\| `([^`]+)` \|/gm)].flatMap((m) => m[1]!.replaceAll('\\|', '|').split(' '));
    expect([...listed].sort()).toEqual(REDIS_COMMANDS.map((c) => c.name).sort());
  });
});
