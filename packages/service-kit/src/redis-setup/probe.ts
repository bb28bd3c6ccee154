import type { Redis } from 'ioredis';
import type { NodeFacts, Refusal } from './findings.js';
import { infoFacts, type InfoFacts } from './info.js';
import { REDIS_COMMANDS, probeCalls, probeNames } from './redis-commands.js';
import { aofReplayChecksDefaultUser } from './redis-version.js';

type Replies = Array<[Error | null, unknown]>;

/** The ACL's refusal in `err`, if it is one (`NOPERM ...`): of the command, its keys or its channels. */
export function refusalOf(err: Error | null): Refusal | undefined {
  if (err === null || !err.message.startsWith('NOPERM')) return undefined;
  if (/\bkeys?\b/.test(err.message)) return 'keys';
  if (/\bchannels?\b/.test(err.message)) return 'channels';
  return 'command';
}

/** What `ACL DRYRUN` answered: allowed, or the refusal it reports (as text, not as an error). */
function dryRunAllows(reply: [Error | null, unknown]): boolean {
  return reply[0] === null && String(reply[1]) === 'OK';
}

async function run(connection: Redis, calls: ReadonlyArray<readonly string[]>): Promise<Replies> {
  const pipeline = connection.pipeline();
  for (const [name, ...args] of calls) pipeline.call(name!, ...args);
  return ((await pipeline.exec()) ?? []) as Replies;
}

/**
 * Reads what the setup checks need from one Redis process, through `connection` (a connection of its
 * own: the check opens a transaction on it). Changes nothing: every command of the table is queued in a
 * transaction that is discarded (the ACL judges a command when it is queued), or asked of `ACL DRYRUN`.
 * Asks only what it needs, so a setup that passes leaves nothing in Redis's ACL log: `CONFIG GET save`
 * only when AOF is off, `ACL DRYRUN default ...` only where the AOF replay checks the default user.
 * Throws on a connection failure (the check is then not made).
 */
export async function probeNode(connection: Redis, node: string, keyPrefix: string): Promise<NodeFacts> {
  const refused = new Map<string, Refusal>();
  const [info, whoami, multi] = await run(connection, [['INFO'], ['ACL', 'WHOAMI'], ['MULTI']]);
  const facts: InfoFacts | undefined = info![0] === null ? infoFacts(String(info![1])) : undefined;
  if (refusalOf(info![0]) !== undefined) refused.set('info', 'command');
  if (refusalOf(whoami![0]) !== undefined) refused.set('acl|whoami', 'command');
  const user = whoami![0] === null ? String(whoami![1]) : undefined;

  let discarded = false;
  if (multi![0] !== null) {
    // Refused: nothing was queued after it. Without a transaction nothing else can be asked safely.
    if (refusalOf(multi![0]) !== undefined) refused.set('multi', 'command');
  } else {
    const calls = probeCalls(keyPrefix);
    const replies = await run(connection, [...calls.map((c) => c.argv), ['DISCARD']]);
    calls.forEach((call, i) => {
      const refusal = refusalOf(replies[i]![0]);
      if (refusal !== undefined) refused.set(call.command.name, refusal);
    });
    const discard = replies[calls.length]!;
    discarded = discard[0] === null;
    // DISCARD refused: the transaction is still open; closing the connection throws it away (the caller
    // closes it), and nothing more is sent on it.
    if (!discarded && refusalOf(discard[0]) !== undefined) refused.set('discard', 'command');
  }

  let rdbSavePoints: boolean | undefined;
  let defaultUserRefused: string[] | undefined;
  let dryRunRefused = false;
  if (discarded || multi![0] !== null) {
    const needSave = facts !== undefined && facts.aofEnabled !== true;
    const needReplay = facts?.aofEnabled === true && aofReplayChecksDefaultUser(facts.version) && user !== 'default';
    const writes = REDIS_COMMANDS.filter((c) => c.write);
    const { key, key2, channel } = probeNames(keyPrefix);
    const dryRun = (i: number): string[] => {
      const command = writes[i]!;
      return ['ACL', 'DRYRUN', 'default', ...command.name.split('|'), ...command.args(key, key2, channel)];
    };
    // EXEC outside a transaction: "EXEC without MULTI" when allowed, NOPERM when not.
    const first = await run(connection, [
      ['EXEC'],
      ...(needSave ? [['CONFIG', 'GET', 'save']] : []),
      ...(needReplay ? [dryRun(0)] : []),
    ]);
    if (refusalOf(first[0]![0]) !== undefined) refused.set('exec', 'command');
    if (needSave) {
      const [err, reply] = first[1]!;
      if (err === null && Array.isArray(reply)) rdbSavePoints = String(reply[1] ?? '').trim() !== '';
    }
    if (needReplay) {
      const answer = first[needSave ? 2 : 1]!;
      if (refusalOf(answer[0]) !== undefined) {
        dryRunRefused = true;
        refused.set('acl|dryrun', 'command');
      } else if (answer[0] === null) {
        const rest = await run(
          connection,
          writes.slice(1).map((_, i) => dryRun(i + 1)),
        );
        defaultUserRefused = [answer, ...rest].flatMap((reply, i) => (dryRunAllows(reply) ? [] : [writes[i]!.name]));
      }
    }
  }
  // Last, as it turns the connection into a subscriber's (closed by the caller): SUBSCRIBE and
  // UNSUBSCRIBE for real, on the check's own channel, which nothing publishes to.
  const { channel } = probeNames(keyPrefix);
  const subscribed = await connection.subscribe(channel).then(
    () => true,
    (err: Error) => {
      const refusal = refusalOf(err);
      if (refusal !== undefined) refused.set('subscribe', refusal);
      return false;
    },
  );
  if (subscribed)
    await connection.unsubscribe(channel).catch((err: Error) => {
      const refusal = refusalOf(err);
      if (refusal !== undefined) refused.set('unsubscribe', refusal);
    });
  return {
    node,
    info: facts,
    user,
    keyPrefix,
    refused,
    rdbSavePoints,
    defaultUserRefused,
    dryRunRefused,
  };
}
