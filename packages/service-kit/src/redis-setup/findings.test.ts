import { describe, expect, it } from 'vitest';
import { judge, judgeNode, oneLine, refusalLine, type NodeFacts } from './findings.js';
import { parseRedisVersion } from './redis-version.js';

/** A process set up as the docs recommend, read by the user the docs give. */
function facts(change: Partial<NodeFacts> = {}, info: Partial<NonNullable<NodeFacts['info']>> = {}): NodeFacts {
  return {
    node: '127.0.0.1:6379',
    info: {
      version: parseRedisVersion('7.0.15'),
      versionText: '7.0.15',
      valkeyVersion: undefined,
      aofEnabled: true,
      maxmemoryPolicy: 'noeviction',
      ...info,
    },
    user: 'cq',
    keyPrefix: 'cq',
    refused: new Map(),
    rdbSavePoints: undefined,
    defaultUserRefused: [],
    dryRunRefused: false,
    ...change,
  };
}

describe('judging what a check read', () => {
  it('finds nothing in the recommended setup', () => {
    expect(judgeNode(facts())).toEqual([]);
    // The default user itself, AOF on, on an affected version: the replay runs as the same user.
    expect(judgeNode(facts({ user: 'default', defaultUserRefused: undefined }))).toEqual([]);
    // RDB save points alone are persistence.
    expect(judgeNode(facts({ rdbSavePoints: true }, { aofEnabled: false }))).toEqual([]);
  });

  it('refuses eviction, naming the policy and the fix', () => {
    const [finding] = judgeNode(facts({}, { maxmemoryPolicy: 'volatile-lru' }));
    expect(finding).toEqual({
      risk: 'eviction',
      node: '127.0.0.1:6379',
      message:
        'Redis 7.0.15 at 127.0.0.1:6379 evicts keys under memory pressure (maxmemory-policy volatile-lru): ' +
        'a lease, a token or a fence counter could vanish; set maxmemory-policy noeviction',
    });
  });

  it('refuses no persistence, and says when the save points could not be read', () => {
    expect(judgeNode(facts({ rdbSavePoints: false }, { aofEnabled: false }))[0]!.message).toMatch(
      /keeps nothing on disk \(appendonly no, no save points\).*set appendonly yes/,
    );
    const unknown = judgeNode(facts({ rdbSavePoints: undefined }, { aofEnabled: false }))[0]!;
    expect(unknown.risk).toBe('no-persistence');
    expect(unknown.message).toMatch(
      /appendonly off, and user "cq" may not read its RDB save points \(CONFIG GET is refused\)/,
    );
  });

  it('refuses the AOF replay of an affected version when the default user may not run the writes', () => {
    const [finding] = judgeNode(facts({ defaultUserRefused: ['set', 'hset'] }));
    expect(finding!.risk).toBe('aof-acl-replay');
    expect(finding!.message).toMatch(
      /^Redis 7\.0\.15 at 127\.0\.0\.1:6379 replays its append-only file as the default user, which may not run set, hset \(redis\/redis#14541, fixed in Redis 8\.4\.4 and 8\.6\.0\): every script's writes would be lost at the next restart; give the default user every permission back/,
    );
    // Fixed versions and AOF off do not care.
    expect(judgeNode(facts({ defaultUserRefused: ['set'] }, { version: parseRedisVersion('8.6.0') }))).toEqual([]);
    expect(judgeNode(facts({ defaultUserRefused: ['set'], rdbSavePoints: true }, { aofEnabled: false }))).toEqual([]);
  });

  it('refuses the AOF replay it could not check (ACL DRYRUN refused), naming +acl|dryrun', () => {
    const findings = judgeNode(
      facts({ defaultUserRefused: undefined, dryRunRefused: true, refused: new Map([['acl|dryrun', 'command']]) }),
    );
    expect(findings.map((f) => f.risk)).toEqual(['aof-acl-replay']);
    expect(findings[0]!.message).toMatch(/user "cq" may not run ACL DRYRUN .*add \+acl\|dryrun to its ACL/);
  });

  it('names the commands, keys and channels the user may not use', () => {
    const [finding] = judgeNode(
      facts({
        refused: new Map([
          ['info', 'command'],
          ['lastsave', 'command'],
          ['hset', 'keys'],
          ['publish', 'channels'],
        ]),
      }),
    );
    expect(finding).toEqual({
      risk: 'acl-commands',
      node: '127.0.0.1:6379',
      message:
        'Redis 7.0.15 at 127.0.0.1:6379: user "cq" may not run info, lastsave; may not use keys cq:* with hset; ' +
        'may not use channels cq:* with publish, which the scripts and processes need: give it the ACL in docs/redis-setup.md',
    });
  });

  it('counts what INFO would have told as not checked when INFO is refused', () => {
    const findings = judgeNode(facts({ info: undefined, refused: new Map([['info', 'command']]) }));
    expect(findings.map((f) => f.risk)).toEqual(['acl-commands', 'eviction', 'no-persistence', 'aof-acl-replay']);
    expect(findings.slice(1).map((f) => f.message)).toEqual([
      'Redis (version unknown) at 127.0.0.1:6379: its eviction policy is not known without INFO',
      'Redis (version unknown) at 127.0.0.1:6379: its persistence is not known without INFO',
      "Redis (version unknown) at 127.0.0.1:6379: whether its AOF replay keeps the scripts' writes is not known without INFO",
    ]);
  });

  it('splits the findings by REDIS_ACCEPT_RISKS, and words one line for them', () => {
    const all = [facts({ rdbSavePoints: false }, { aofEnabled: false, maxmemoryPolicy: 'allkeys-lru' })];
    const { refusing, accepted } = judge(all, new Set(['eviction']));
    expect(refusing.map((f) => f.risk)).toEqual(['no-persistence']);
    expect(accepted.map((f) => f.risk)).toEqual(['eviction']);
    const both = judge(all, new Set()).refusing;
    expect(oneLine(both)).toBe(`${both[0]!.message}; also: ${both[1]!.message}`);
    expect(oneLine(both)).not.toContain('\n');
    expect(refusalLine(both)).toMatch(
      /; set appendonly yes \(docs\/redis-setup\.md\) \(to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=eviction,no-persistence\)$/,
    );
  });

  it('names Valkey as Valkey, and an unknown user as the one in REDIS_URL', () => {
    const [finding] = judgeNode(facts({ user: undefined }, { valkeyVersion: '8.1.1', maxmemoryPolicy: 'allkeys-lfu' }));
    expect(finding!.message).toMatch(/^Valkey 8\.1\.1 at 127\.0\.0\.1:6379 evicts keys/);
    const [refused] = judgeNode(facts({ user: undefined, refused: new Map([['get', 'command']]) }));
    expect(refused!.message).toContain('the user in REDIS_URL may not run get');
  });

  it('tells the same problem on several nodes once, naming them all', () => {
    const nodes = ['127.0.0.1:7000', '127.0.0.1:7001', '127.0.0.1:7002'].map((node) =>
      facts({ node, rdbSavePoints: false }, { aofEnabled: false }),
    );
    nodes[2] = facts(
      { node: '127.0.0.1:7002', rdbSavePoints: false },
      { aofEnabled: false, maxmemoryPolicy: 'allkeys-lru' },
    );
    const { refusing } = judge(nodes, new Set());
    expect(oneLine(refusing)).toBe(
      'Redis 7.0.15 at 127.0.0.1:7000, 127.0.0.1:7001, 127.0.0.1:7002 keeps nothing on disk (appendonly no, no save points): ' +
        'a restart of Redis loses every session, token and fence; set appendonly yes (docs/redis-setup.md); ' +
        'also: Redis 7.0.15 at 127.0.0.1:7002 evicts keys under memory pressure (maxmemory-policy allkeys-lru): ' +
        'a lease, a token or a fence counter could vanish; set maxmemory-policy noeviction',
    );
  });
});
