/**
 * Every Redis command the API and the worker hosts run, with who runs it: the ACL a deployment's Redis
 * user needs is built from this table ({@link aclRules}), the processes check their user against it
 * when they connect ({@link probeCalls}), and tests check it against every `redis.call` of `lua/`, of
 * BullMQ's scripts and what a running system asks of Redis.
 */

/** Who runs a command. */
export type CommandSource =
  /** Our scripts in `lua/`. */
  | 'scripts'
  /** BullMQ's scripts and its clients (the spawn queues and the webhook delivery queue). */
  | 'bullmq'
  /** The processes themselves, through ioredis (connection set-up included). */
  | 'processes'
  /** This check, at connect. */
  | 'setup-check';

/** One row of {@link REDIS_COMMANDS}. */
export interface RedisCommand {
  /** The command as an ACL rule names it: `hset`, or `client|setname` for a subcommand. */
  readonly name: string;
  /** Whether Redis flags it `write`: it reaches the append-only file, and the AOF replay checks it. */
  readonly write: boolean;
  readonly by: readonly CommandSource[];
  /**
   * Arguments of a call that the ACL judges as it would judge ours (same keys, same channels), given a
   * key and a second key under the prefix and a channel under it. Never run: queued in a transaction
   * that is discarded, or asked of `ACL DRYRUN`.
   */
  readonly args: (key: string, key2: string, channel: string) => readonly string[];
  /**
   * Only this check runs it, and only where it must (`ACL DRYRUN` where the AOF replay checks the
   * default user): a user without it is told what could not be checked, not refused for the command.
   */
  readonly optional?: true;
  /**
   * Not queued in the check's transaction (ioredis takes a SUBSCRIBE for the connection's, whatever
   * Redis answers): the check runs it for real, last, on its own connection, which it then closes.
   */
  readonly direct?: true;
}

const S = ['scripts'] as const;
const B = ['bullmq'] as const;
const SB = ['scripts', 'bullmq'] as const;
const P = ['processes'] as const;
const SBP = ['scripts', 'bullmq', 'processes'] as const;

function row(
  name: string,
  write: boolean,
  by: readonly CommandSource[],
  args: (key: string, key2: string, channel: string) => readonly string[],
): RedisCommand {
  return { name, write, by, args };
}

/** A script never run (the check queues it, never executes it). */
const NO_SCRIPT = 'return 0';
const NO_SHA = '0'.repeat(40);

/** Every command the processes and their scripts run, in the order the docs list them. */
export const REDIS_COMMANDS: readonly RedisCommand[] = [
  // Strings and keys
  row('get', false, SBP, (k) => [k]),
  row('set', true, SBP, (k) => [k, 'v']),
  row('incr', true, SB, (k) => [k]),
  row('incrby', true, B, (k) => [k, '1']),
  row('del', true, SBP, (k) => [k]),
  row('unlink', true, B, (k) => [k]),
  row('exists', false, SB, (k) => [k]),
  row('type', false, B, (k) => [k]),
  row('rename', true, B, (k, k2) => [k, k2]),
  row('persist', true, B, (k) => [k]),
  row('pexpire', true, SBP, (k) => [k, '1000']),
  row('pexpireat', true, SB, (k) => [k, '1']),
  row('pttl', false, SB, (k) => [k]),
  // Hashes
  row('hset', true, SBP, (k) => [k, 'f', 'v']),
  row('hmset', true, B, (k) => [k, 'f', 'v']),
  row('hget', false, SBP, (k) => [k, 'f']),
  row('hmget', false, SB, (k) => [k, 'f']),
  row('hgetall', false, SBP, (k) => [k]),
  row('hdel', true, SB, (k) => [k, 'f']),
  row('hexists', false, SB, (k) => [k, 'f']),
  row('hincrby', true, SBP, (k) => [k, 'f', '1']),
  row('hlen', false, SB, (k) => [k]),
  row('hscan', false, B, (k) => [k, '0']),
  // Sorted sets
  row('zadd', true, SB, (k) => [k, '1', 'm']),
  row('zrem', true, SB, (k) => [k, 'm']),
  row('zscore', false, SB, (k) => [k, 'm']),
  row('zcard', false, SB, (k) => [k]),
  row('zcount', false, B, (k) => [k, '0', '1']),
  row('zrange', false, SBP, (k) => [k, '0', '1']),
  row('zrangebyscore', false, SBP, (k) => [k, '0', '1']),
  row('zrevrange', false, B, (k) => [k, '0', '1']),
  row('zrevrangebyscore', false, B, (k) => [k, '1', '0']),
  row('zrangebylex', false, B, (k) => [k, '-', '+']),
  row('zlexcount', false, B, (k) => [k, '-', '+']),
  row('zremrangebyscore', true, SB, (k) => [k, '0', '1']),
  row('zremrangebyrank', true, B, (k) => [k, '0', '1']),
  row('zpopmin', true, B, (k) => [k]),
  row('bzpopmin', true, B, (k) => [k, '1']),
  // Lists
  row('lpush', true, SB, (k) => [k, 'v']),
  row('rpush', true, B, (k) => [k, 'v']),
  row('lpop', true, B, (k) => [k]),
  row('rpop', true, B, (k) => [k]),
  row('rpoplpush', true, B, (k, k2) => [k, k2]),
  row('lrem', true, B, (k) => [k, '0', 'v']),
  row('lset', true, B, (k) => [k, '0', 'v']),
  row('ltrim', true, SB, (k) => [k, '0', '1']),
  row('llen', false, B, (k) => [k]),
  row('lrange', false, SBP, (k) => [k, '0', '1']),
  row('lindex', false, B, (k) => [k, '0']),
  row('lpos', false, B, (k) => [k, 'v']),
  // Sets
  row('sadd', true, SB, (k) => [k, 'm']),
  row('srem', true, B, (k) => [k, 'm']),
  row('scard', false, B, (k) => [k]),
  row('smembers', false, SB, (k) => [k]),
  row('sismember', false, B, (k) => [k, 'm']),
  row('sscan', false, B, (k) => [k, '0']),
  // Streams
  row('xadd', true, SB, (k) => [k, '*', 'f', 'v']),
  row('xtrim', true, SB, (k) => [k, 'MAXLEN', '1']),
  row('xdel', true, B, (k) => [k, '0-1']),
  row('xrange', false, SB, (k) => [k, '-', '+']),
  row('xrevrange', false, P, (k) => [k, '+', '-']),
  row('xlen', false, B, (k) => [k]),
  row('xread', false, B, (k) => ['STREAMS', k, '0']),
  // Publish/subscribe
  row('publish', false, S, (_k, _k2, c) => [c, 'm']),
  { ...row('subscribe', false, P, (_k, _k2, c) => [c]), direct: true },
  { ...row('unsubscribe', false, P, (_k, _k2, c) => [c]), direct: true },
  // Scripts and transactions
  row('evalsha', false, P, (k) => [NO_SHA, '1', k]),
  row('eval', false, P, (k) => [NO_SCRIPT, '1', k]),
  row('script|load', false, P, () => [NO_SCRIPT]),
  row('multi', false, ['bullmq', 'processes', 'setup-check'], () => []),
  row('exec', false, ['bullmq', 'processes'], () => []),
  row('discard', false, ['setup-check'], () => []),
  row('wait', false, P, () => ['0', '0']),
  // Server
  row('info', false, ['scripts', 'bullmq', 'processes', 'setup-check'], () => []),
  row('lastsave', false, S, () => []),
  row('time', false, SBP, () => []),
  row('ping', false, P, () => []),
  row('client|setname', false, ['bullmq', 'processes'], () => ['cq']),
  row('cluster|myid', false, S, () => []),
  row('cluster|slots', false, P, () => []),
  { ...row('acl|whoami', false, ['setup-check'], () => []), optional: true },
  { ...row('acl|dryrun', false, ['setup-check'], (k) => ['default', 'get', k]), optional: true },
];

/** The key pattern of a deployment: every key starts with `<KEY_PREFIX>:`. */
export function keyPattern(keyPrefix: string): string {
  return `${keyPrefix}:*`;
}

/**
 * The ACL rules a deployment's Redis user needs, for `ACL SETUSER <user> on ><password> <rules>` or an
 * ACL file's `user <user> on ><password> <rules>`: its keys and channels under `KEY_PREFIX`, and
 * exactly the commands of {@link REDIS_COMMANDS}.
 */
export function aclRules(keyPrefix: string): string {
  const pattern = keyPattern(keyPrefix);
  return [
    'resetkeys',
    `~${pattern}`,
    'resetchannels',
    `&${pattern}`,
    '-@all',
    ...REDIS_COMMANDS.map((c) => `+${c.name}`),
  ].join(' ');
}

/** One call of {@link probeCalls}: the command's row and the words to send. */
export interface ProbeCall {
  readonly command: RedisCommand;
  readonly argv: readonly string[];
}

/** The key, second key and channel the check names its calls with: under the prefix, one hash slot. */
export function probeNames(keyPrefix: string): { key: string; key2: string; channel: string } {
  return {
    key: `${keyPrefix}:{setup-check}:a`,
    key2: `${keyPrefix}:{setup-check}:b`,
    channel: `${keyPrefix}:setup-check`,
  };
}

/**
 * A call of every command of the table that the check queues in a transaction (all but MULTI, EXEC
 * and DISCARD, which it runs itself, and the {@link RedisCommand.direct} ones), as the processes would
 * make it.
 */
export function probeCalls(keyPrefix: string): ProbeCall[] {
  const { key, key2, channel } = probeNames(keyPrefix);
  const own = ['multi', 'exec', 'discard'];
  return REDIS_COMMANDS.filter((c) => !own.includes(c.name) && c.direct !== true).map((command) => ({
    command,
    argv: [...command.name.split('|'), ...command.args(key, key2, channel)],
  }));
}
