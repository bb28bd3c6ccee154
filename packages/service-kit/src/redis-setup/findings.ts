import type { InfoFacts } from './info.js';
import { REDIS_COMMANDS } from './redis-commands.js';
import { aofReplayChecksDefaultUser } from './redis-version.js';

/** Commands a user may lack without being refused for it (see `RedisCommand.optional`). */
const OPTIONAL = new Set(REDIS_COMMANDS.filter((c) => c.optional === true).map((c) => c.name));

/**
 * The ways a Redis can be set up to lose what the coordinator wrote, each a word of
 * `REDIS_ACCEPT_RISKS` (the override for those who know).
 */
export const REDIS_RISKS = ['eviction', 'no-persistence', 'aof-acl-replay', 'acl-commands'] as const;

/** One of {@link REDIS_RISKS}. */
export type RedisRisk = (typeof REDIS_RISKS)[number];

/**
 * What a check read from one Redis process. `undefined` where the user may not read it (the reason in
 * the `...Refused` field next to it).
 */
export interface NodeFacts {
  /** `host:port` of the process. */
  node: string;
  /** From `INFO`; undefined when INFO was refused. */
  info: InfoFacts | undefined;
  /** The user the processes are, from `ACL WHOAMI`; undefined when refused. */
  user: string | undefined;
  /** `KEY_PREFIX`: the check named its keys and channels under it. */
  keyPrefix: string;
  /** Commands of the table the user may not run, by command: the command itself, or its keys or channels. */
  refused: ReadonlyMap<string, Refusal>;
  /** Whether `CONFIG GET save` names RDB save points; undefined when not asked or refused. */
  rdbSavePoints: boolean | undefined;
  /**
   * The `default` user's answer for each command the AOF replays: the commands it may not run; undefined
   * when not asked (not needed) or when `ACL DRYRUN` was refused to this user.
   */
  defaultUserRefused: readonly string[] | undefined;
  /** Whether `ACL DRYRUN` was asked and refused to this user. */
  dryRunRefused: boolean;
}

/** What the ACL refused of a call: the command, the keys it names, or the channels. */
export type Refusal = 'command' | 'keys' | 'channels';

/** A way the setup would lose writes, found on one process: a line that names it and the fix. */
export interface Finding {
  risk: RedisRisk;
  node: string;
  /** One line: what is wrong, what it costs, what to change. */
  message: string;
}

function server(facts: NodeFacts): string {
  const info = facts.info;
  if (info?.valkeyVersion !== undefined) return `Valkey ${info.valkeyVersion} at ${facts.node}`;
  return `Redis ${info?.versionText ?? '(version unknown)'} at ${facts.node}`;
}

function userName(facts: NodeFacts): string {
  return facts.user === undefined ? 'the user in REDIS_URL' : `user "${facts.user}"`;
}

/**
 * Whether the AOF replay of this process may fail the scripts' transactions: AOF on, a version with
 * redis/redis#14541, and a `default` user not shown to be allowed every write the replay runs.
 */
function replayRisk(facts: NodeFacts): Finding | undefined {
  const info = facts.info;
  if (info === undefined && facts.user !== 'default')
    return {
      risk: 'aof-acl-replay',
      node: facts.node,
      message: `${server(facts)}: whether its AOF replay keeps the scripts' writes is not known without INFO`,
    };
  if (info?.aofEnabled !== true || !aofReplayChecksDefaultUser(info.version)) return undefined;
  // The processes run as `default` and may run every command (the refused ones are reported apart):
  // the replay runs as the same user.
  if (facts.user === 'default') return undefined;
  const bug = 'redis/redis#14541, fixed in Redis 8.4.4 and 8.6.0';
  const fix =
    'give the default user every permission back (`user default off ~* &* +@all` keeps it closed to logins), ' +
    'upgrade Redis, or turn off appendonly';
  if (facts.defaultUserRefused !== undefined) {
    if (facts.defaultUserRefused.length === 0) return undefined;
    return {
      risk: 'aof-acl-replay',
      node: facts.node,
      message:
        `${server(facts)} replays its append-only file as the default user, which may not run ` +
        `${facts.defaultUserRefused.join(', ')} (${bug}): every script's writes would be lost at the next restart; ${fix}`,
    };
  }
  return {
    risk: 'aof-acl-replay',
    node: facts.node,
    message:
      `${server(facts)} replays its append-only file as the default user (${bug}), and ${userName(facts)} ` +
      `may not run ACL DRYRUN to check that the default user may run the scripts' writes: add +acl|dryrun ` +
      `to its ACL (docs/redis-setup.md), or ${fix}`,
  };
}

/**
 * The findings on one process, in the order they are told: commands first (they say what could not be
 * read), then eviction, persistence and the AOF replay.
 */
export function judgeNode(facts: NodeFacts): Finding[] {
  const findings: Finding[] = [];
  const refused = [...facts.refused].filter(([name]) => !OPTIONAL.has(name));
  if (refused.length > 0) {
    const of = (kind: Refusal): string[] => refused.filter(([, k]) => k === kind).map(([name]) => name);
    const parts = [
      of('command').length > 0 ? `may not run ${of('command').join(', ')}` : '',
      of('keys').length > 0 ? `may not use keys ${facts.keyPrefix}:* with ${of('keys').join(', ')}` : '',
      of('channels').length > 0 ? `may not use channels ${facts.keyPrefix}:* with ${of('channels').join(', ')}` : '',
    ].filter((p) => p !== '');
    findings.push({
      risk: 'acl-commands',
      node: facts.node,
      message:
        `${server(facts)}: ${userName(facts)} ${parts.join('; ')}, which the scripts and processes need: ` +
        `give it the ACL in docs/redis-setup.md`,
    });
  }
  const info = facts.info;
  if (info === undefined) {
    // INFO refused: reported above; eviction and persistence cannot be told.
    findings.push({
      risk: 'eviction',
      node: facts.node,
      message: `${server(facts)}: its eviction policy is not known without INFO`,
    });
  } else if (info.maxmemoryPolicy !== undefined && info.maxmemoryPolicy !== 'noeviction') {
    findings.push({
      risk: 'eviction',
      node: facts.node,
      message:
        `${server(facts)} evicts keys under memory pressure (maxmemory-policy ${info.maxmemoryPolicy}): ` +
        `a lease, a token or a fence counter could vanish; set maxmemory-policy noeviction`,
    });
  }
  if (info === undefined) {
    findings.push({
      risk: 'no-persistence',
      node: facts.node,
      message: `${server(facts)}: its persistence is not known without INFO`,
    });
  } else if (info.aofEnabled !== true && facts.rdbSavePoints !== true) {
    findings.push({
      risk: 'no-persistence',
      node: facts.node,
      message:
        facts.rdbSavePoints === false
          ? `${server(facts)} keeps nothing on disk (appendonly no, no save points): a restart of Redis ` +
            `loses every session, token and fence; set appendonly yes (docs/redis-setup.md)`
          : `${server(facts)} has appendonly off, and ${userName(facts)} may not read its RDB save points ` +
            `(CONFIG GET is refused): set appendonly yes (docs/redis-setup.md), or accept it if RDB ` +
            `snapshots are configured`,
    });
  }
  const replay = replayRisk(facts);
  if (replay !== undefined) findings.push(replay);
  return findings;
}

/** The findings of every process, split into those `accepted` lets pass and those that refuse. */
export function judge(
  facts: readonly NodeFacts[],
  accepted: ReadonlySet<RedisRisk>,
): { refusing: Finding[]; accepted: Finding[] } {
  const all = facts.flatMap(judgeNode);
  return {
    refusing: all.filter((f) => !accepted.has(f.risk)),
    accepted: all.filter((f) => accepted.has(f.risk)),
  };
}

/**
 * One line for all of `findings` (each already one line), for a log line or `/readyz`. The same problem
 * on several processes (a Cluster's nodes set up alike) is told once, naming them all.
 */
export function oneLine(findings: readonly Finding[]): string {
  const groups = new Map<string, { risk: RedisRisk; nodes: string[] }>();
  for (const f of findings) {
    const template = `${f.risk}\u0000${f.message.replace(f.node, '\u0000')}`;
    const group = groups.get(template);
    if (group === undefined) groups.set(template, { risk: f.risk, nodes: [f.node] });
    else group.nodes.push(f.node);
  }
  return [...groups]
    .map(([template, { nodes }]) => template.slice(template.indexOf('\u0000') + 1).replace('\u0000', nodes.join(', ')))
    .join('; also: ');
}

/** The line a process exits with when `findings` refuse its start: they, and how to start anyway. */
export function refusalLine(findings: readonly Finding[]): string {
  const risks = [...new Set(findings.map((f) => f.risk))].join(',');
  return `${oneLine(findings)} (to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=${risks})`;
}
