import { startRedisServer, until, type RedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../config.js';
import { createRedis } from '../redis.js';
import { judge, judgeNode, type RedisRisk } from './findings.js';
import { probeNode } from './probe.js';
import { REDIS_COMMANDS, aclRules } from './redis-commands.js';
import { RedisSetup, type SetupLogger } from './redis-setup.js';

const servers: RedisServer[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

/** A redis-server with `args` after the harness's (no persistence unless asked). */
async function server(...args: string[]): Promise<RedisServer> {
  const started = await startRedisServer({ args });
  servers.push(started);
  return started;
}

function connect(url: string): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: 1, disableClientInfo: true });
  client.on('error', () => {});
  clients.push(client);
  return client;
}

function withUser(url: string, user: string, password: string): string {
  return url.replace('redis://', `redis://${user}:${password}@`);
}

/** The ACL the docs give, as redis-server arguments, with the default user closed to logins but allowed everything. */
const RECOMMENDED_USERS = [
  '--user',
  'default',
  'off',
  '~*',
  '&*',
  '+@all',
  '--user',
  'cq',
  'on',
  '>cq-password',
  ...aclRules('cq').split(' '),
];

async function factsOf(url: string) {
  const connection = connect(url);
  return probeNode(connection, 'node', 'cq');
}

/** A logger that keeps its lines. */
function keep(): SetupLogger & { lines: Array<{ level: string; msg: string }> } {
  const lines: Array<{ level: string; msg: string }> = [];
  return {
    lines,
    info: (_o, msg) => lines.push({ level: 'info', msg }),
    warn: (_o, msg) => lines.push({ level: 'warn', msg }),
    error: (_o, msg) => lines.push({ level: 'error', msg }),
  };
}

describe('reading a Redis setup', () => {
  it('finds nothing wrong with the recommended setup, read by the documented user, and changes nothing', async () => {
    const redis = await server(
      '--appendonly',
      'yes',
      ...RECOMMENDED_USERS,
      '--user',
      'admin',
      'on',
      '>admin',
      '~*',
      '&*',
      '+@all',
    );
    const facts = await factsOf(withUser(redis.url, 'cq', 'cq-password'));
    expect(facts.user).toBe('cq');
    expect([...facts.refused]).toEqual([]);
    expect(facts.info?.aofEnabled).toBe(true);
    // 7.0.15 has the replay bug: the default user was asked about, and may run every write.
    expect(facts.defaultUserRefused).toEqual([]);
    expect(judgeNode(facts)).toEqual([]);
    const admin = connect(withUser(redis.url, 'admin', 'admin'));
    expect(await admin.dbsize()).toBe(0);
    // Nothing was refused on the way: no entry in the ACL log.
    expect(await admin.call('ACL', 'LOG')).toEqual([]);
  });

  it('finds the replay that drops the writes when the config file says `user default off`', async () => {
    const redis = await server(
      '--appendonly',
      'yes',
      '--user',
      'default',
      'off',
      '--user',
      'cq',
      'on',
      '>pw',
      '~*',
      '&*',
      '+@all',
    );
    const facts = await factsOf(withUser(redis.url, 'cq', 'pw'));
    expect(facts.defaultUserRefused).toEqual(REDIS_COMMANDS.filter((c) => c.write).map((c) => c.name));
    expect(judgeNode(facts).map((f) => f.risk)).toEqual(['aof-acl-replay']);
  });

  it('finds what a user without @dangerous may not run, and that it cannot check the replay', async () => {
    const redis = await server('--appendonly', 'yes', '--user', 'cq', 'on', '>pw', '~*', '&*', '+@all', '-@dangerous');
    const facts = await factsOf(withUser(redis.url, 'cq', 'pw'));
    expect([...facts.refused.keys()]).toEqual(expect.arrayContaining(['info', 'lastsave', 'acl|dryrun']));
    const findings = judgeNode(facts);
    expect(findings.map((f) => f.risk)).toEqual(['acl-commands', 'eviction', 'no-persistence', 'aof-acl-replay']);
    expect(findings[0]!.message).toMatch(/user "cq" may not run info, lastsave, which the scripts/);
  });

  it('finds a user whose keys or channels are not under KEY_PREFIX', async () => {
    const redis = await server('--user', 'cq', 'on', '>pw', '~other:*', '&other:*', '+@all');
    const facts = await factsOf(withUser(redis.url, 'cq', 'pw'));
    expect(facts.refused.get('hset')).toBe('keys');
    expect(facts.refused.get('publish')).toBe('channels');
    expect(facts.refused.has('info')).toBe(false);
  });

  it('finds no persistence and eviction, and reads save points where CONFIG GET is allowed', async () => {
    const none = await factsOf((await server('--maxmemory-policy', 'allkeys-lru')).url);
    expect(none.rdbSavePoints).toBe(false);
    expect(judgeNode(none).map((f) => f.risk)).toEqual(['eviction', 'no-persistence']);
    const rdb = await factsOf((await server('--save', '3600 1')).url);
    expect(rdb.rdbSavePoints).toBe(true);
    expect(judgeNode(rdb)).toEqual([]);
  });
});

describe('RedisSetup', () => {
  async function started(url: string, accept: RedisRisk[] = []) {
    const client = createRedis({ redisUrl: url, redisClusterNodes: undefined } as never, 'requests');
    client.on('error', () => {});
    clients.push(client as Redis);
    const logger = keep();
    const setup = new RedisSetup({ client, keyPrefix: 'cq', accept: new Set(accept), logger });
    return { setup, logger, start: () => setup.start() };
  }

  it('refuses a wrong password with one line naming REDIS_URL, never the password', async () => {
    const redis = await server(
      '--user',
      'default',
      'off',
      '--user',
      'cq',
      'on',
      '>right-password',
      '~*',
      '&*',
      '+@all',
    );
    const { start } = await started(withUser(redis.url, 'cq', 'wrong-password'));
    const err = await start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe(
      `REDIS_URL: Redis at 127.0.0.1:${redis.port} refused the user name or password (WRONGPASS invalid username-password pair or user is disabled.): ` +
        'set the user and password of an ACL user that is on, redis://<user>:<password>@<host>:<port>',
    );
    expect((err as Error).message).not.toContain('wrong-password');
  });

  it('refuses a Redis that asks for a password when none is given', async () => {
    const redis = await server('--requirepass', 'a-password');
    const { start } = await started(redis.url);
    await expect(start()).rejects.toThrow(/^REDIS_URL: Redis at 127\.0\.0\.1:\d+ asks for a password \(NOAUTH/);
  });

  it('refuses to start on a bad setup, unless REDIS_ACCEPT_RISKS accepts it, which it warns of', async () => {
    const redis = await server();
    await expect((await started(redis.url)).start()).rejects.toThrow(
      /keeps nothing on disk.*\(to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=no-persistence\)$/,
    );
    const accepted = await started(redis.url, ['no-persistence']);
    await accepted.start();
    expect(accepted.setup.problem).toBeUndefined();
    expect(accepted.logger.lines.filter((l) => l.level === 'warn').map((l) => l.msg)).toEqual([
      'REDIS_ACCEPT_RISKS=no-persistence: Redis set up to lose writes in these ways does not stop this process',
      expect.stringMatching(
        /^accepted by REDIS_ACCEPT_RISKS=no-persistence: Redis 7\.\d+\.\d+ at .* keeps nothing on disk/,
      ),
    ]);
    // A reconnect finds it again: not told again.
    const checks = accepted.setup.checks;
    await connect(redis.url).client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await until(() => accepted.setup.checks > checks, 10_000, 'the check after the reconnect');
    expect(accepted.logger.lines.filter((l) => l.level === 'warn')).toHaveLength(2);
    accepted.setup.close();
  });

  it('after a reconnect to a Redis now set up to lose writes, logs it and keeps it as the problem until it is fixed', async () => {
    const redis = await server('--appendonly', 'yes');
    const { setup, logger, start } = await started(redis.url);
    await start();
    expect(setup.problem).toBeUndefined();
    // Turned into a cache behind the process's back, and restarted.
    const admin = connect(redis.url);
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await admin.config('SET', 'appendonly', 'no');
    await admin.config('REWRITE').catch(() => {});
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await until(() => setup.problem !== undefined, 10_000, 'the problem found after the reconnect');
    expect(setup.problem).toMatch(/evicts keys under memory pressure \(maxmemory-policy allkeys-lru\)/);
    expect(logger.lines.some((l) => l.level === 'error' && l.msg === setup.problem)).toBe(true);
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'appendonly', 'yes');
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await until(() => setup.problem === undefined, 10_000, 'the problem gone after the next reconnect');
    expect(logger.lines.at(-1)).toEqual({ level: 'info', msg: 'Redis setup checked again: the problem is gone' });
    setup.close();
  });

  it('after a reconnect refused for its password, keeps and logs that as the problem until a reconnect gets through', async () => {
    const redis = await server('--appendonly', 'yes', '--requirepass', 'first-password');
    const { setup, logger, start } = await started(withUser(redis.url, '', 'first-password'));
    await start();
    const admin = connect(withUser(redis.url, '', 'first-password'));
    await admin.config('SET', 'requirepass', 'second-password');
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await until(() => setup.problem !== undefined, 10_000, 'the refused password found');
    expect(setup.problem).toMatch(
      /^REDIS_URL: Redis at 127\.0\.0\.1:\d+ refused the user name or password \(WRONGPASS/,
    );
    expect(logger.lines.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([setup.problem]);
    await admin.config('SET', 'requirepass', 'first-password');
    await until(() => setup.problem === undefined, 10_000, 'the problem gone once a reconnect gets through');
    setup.close();
  });

  it('judges every accepted risk apart', async () => {
    const redis = await server('--maxmemory-policy', 'volatile-lru');
    const facts = await factsOf(redis.url);
    expect(judge([facts], new Set(['eviction'])).refusing.map((f) => f.risk)).toEqual(['no-persistence']);
  });
});
