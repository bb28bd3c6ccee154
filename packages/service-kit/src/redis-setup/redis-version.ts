/** A Redis version as `INFO server` gives it (`redis_version:7.0.15`): major, minor, patch. */
export type RedisVersion = readonly [major: number, minor: number, patch: number];

/** `7.0.15` → `[7, 0, 15]`; undefined for anything else (a missing field, a vendor's own scheme). */
export function parseRedisVersion(text: string | undefined): RedisVersion | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)/.exec(text?.trim() ?? '');
  if (match === null) return undefined;
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** Negative when `a` is older than `b`, 0 when equal, positive when newer. */
export function compareRedisVersions(a: RedisVersion, b: RedisVersion): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** The first releases of each line that carry the fix of redis/redis#14541 (PR #14545). */
export const REPLAY_FIXED_IN: readonly RedisVersion[] = [
  [8, 4, 4],
  [8, 6, 0],
];

/**
 * Whether a Redis of `version` drops MULTI/EXEC transactions (every script's writes among them) when it
 * replays its append-only file at start, unless the `default` user may run every command in them
 * (redis/redis#14541). An unknown version counts as one that does.
 *
 * Why: since 7.0 the client that replays the AOF is a client of the `default` user (`createClient`
 * gives every client `DefaultUser`; in 6.x the AOF client had no user, which every ACL check lets
 * through), and EXEC checks the ACL again for each queued command, so a `default` user without the
 * permission (`user default off` in a config file resets it to none) fails every transaction. Scripts
 * are replicated as their effects wrapped in MULTI/EXEC, so each script's writes are lost, while plain
 * commands replay. Reproduced on Debian's 7.0.15 with five lines of redis-cli.
 *
 * Fixed by PR #14545 (merged 22 Nov 2025): in 8.6-RC1, hence 8.6.0 and later, and backported to 8.4.4
 * (redis/redis#15301; listed in the 8.4.4 release notes). The release notes of 8.2 (to 8.2.9), 8.0 (to
 * 8.0.6) and 7.4 (to 7.4.11) do not list it, nor does any 7.2 or 7.0 release: every version below the
 * first one proven fixed counts as affected. Valkey reports `redis_version:7.2.4` and has the same bug
 * (valkey-io/valkey#3983): it counts as affected too.
 */
export function aofReplayChecksDefaultUser(version: RedisVersion | undefined): boolean {
  if (version === undefined) return true;
  if (version[0] < 7) return false;
  const [fixed84, fixed86] = REPLAY_FIXED_IN as [RedisVersion, RedisVersion];
  if (compareRedisVersions(version, fixed86) >= 0) return false;
  return !(version[0] === 8 && version[1] === 4 && compareRedisVersions(version, fixed84) >= 0);
}
