import { parseArgs } from 'node:util';
import {
  ApiError,
  CoordinatorClient,
  NoSessionError,
  type EndedSession,
  type LiveSession,
  type StreamedEvent,
} from '@cq/client';
import { exitCodeOf, exitCodes } from './exit-codes.js';
import { describeError, duration, table } from './format.js';
import { setTimeout as sleep } from 'node:timers/promises';

const USAGE = `cq: drive the worker coordinator's HTTP API

usage: cq <command> [arguments] [--url URL] [--key KEY] [--json]

commands:
  token <userId> [--metadata JSON] [--ttl MS] [--lifetime MS]   issue a one-time spawn token
  spawn <token>                                                 admit a spawn with a token
  spawn --user <userId> [--metadata JSON] [--lifetime MS]       issue a token and spawn with it
  status <userId>                                               the user's live session
  extend <userId> <ms>                                          the live session now ends <ms> from now (sooner or later);
                                                                a pending one gets that lifetime once started
  stop <userId>                                                 stop the user's live session
  history <userId>                                              the user's ended sessions
  watch <userId>                                                follow the live session until it ends (or say how the last one ended)
  hosts                                                         the live worker hosts and the free slots
  drain <workerId>                                              drain a worker host: no new sessions, exit 0 after its last one
  demo [--users N]                                              spawn sessions for a few users and show what happens

options:
  --url URL    the API (default: $CQ_API_URL, else http://127.0.0.1:3000)
  --key KEY    a service key (default: $CQ_API_KEY)
  --json       print JSON instead of text

exit codes: 0 ok, 1 internal error, 2 usage, 3 unauthorized, 4 token invalid, 5 no session,
6 session exists, 7 throttled, 8 unavailable or no capacity, 9 other refusal, 14 no such host; watch: 10 failed, 11 expired,
12 stopped, 13 lost (0 completed).
`;

/** Exit codes of `watch` for the state the session ended in. */
const endCodes: Record<EndedSession['state'], number> = {
  completed: 0,
  failed: 10,
  expired: 11,
  stopped: 12,
  lost: 13,
};

class UsageError extends Error {}

interface Context {
  client: CoordinatorClient;
  json: boolean;
  out: (line: string) => void;
}

function parseIntOption(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number of milliseconds (got "${value}")`);
  return Number(value);
}

function parseMetadata(value: string | undefined): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new UsageError(`--metadata must be a JSON object (got ${value})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new UsageError('--metadata must be a JSON object');
  return parsed as Record<string, unknown>;
}

function print(ctx: Context, value: unknown, text: string): void {
  ctx.out(ctx.json ? JSON.stringify(value) : text);
}

function describeSession(s: LiveSession): string {
  const now = Date.now();
  const parts = [`${s.userId}: ${s.state}`, `fence ${s.fence}`, `session ${s.sessionId}`];
  if (s.workerId) parts.push(`on ${s.workerId}`);
  if (s.leaseExpiresAt) parts.push(`lease ${duration(Date.parse(s.leaseExpiresAt) - now)}`);
  if (s.deadline) parts.push(`lifetime left ${duration(Date.parse(s.deadline) - now)}`);
  return parts.join(', ');
}

/** Event types after which the session is over (`withdrawn`: its admission was rolled back). */
const finalTypes: ReadonlySet<string> = new Set([...Object.keys(endCodes), 'withdrawn']);

function describeEvent(e: Exclude<StreamedEvent, { type: 'error' }>): string {
  const parts = [`${e.userId}: ${e.type}`, `fence ${e.fence}`, `session ${e.sessionId}`];
  if (e.workerId) parts.push(`on ${e.workerId}`);
  if (e.endpoint) parts.push(`at ${e.endpoint}`);
  if (e.deadline) parts.push(`lifetime left ${duration(Date.parse(e.deadline) - Date.now())}`);
  return parts.join(', ');
}

async function watch(ctx: Context, userId: string): Promise<number> {
  const tty = process.stdout.isTTY === true && !ctx.json;
  // Follow the live session's event stream (its current state first, then each change as it happens);
  // the stream ends after the session does, and its end is reported from the history below. Without a
  // live session the stream would wait for the next one: report how the last one ended instead.
  const sessionId = (await ctx.client.findSession(userId))?.sessionId;
  const stop = new AbortController();
  const events = ctx.client.events({
    userId,
    signal: stop.signal,
    // Gone before the stream was subscribed, its end would never be streamed: it is in the history.
    onOpen: () =>
      void ctx.client.findSession(userId).then(
        (now) => now?.sessionId !== sessionId && stop.abort(),
        () => stop.abort(),
      ),
  });
  for await (const event of sessionId === undefined ? [] : events) {
    if (event.type === 'error') continue;
    // The followed session ended between two looks and a newer one is streamed: report the followed one.
    if (event.sessionId !== sessionId) break;
    if (finalTypes.has(event.type)) break;
    const line = describeEvent(event);
    if (ctx.json) ctx.out(JSON.stringify(event));
    else if (tty) process.stdout.write(`\r\x1b[2K${line}`);
    else ctx.out(line);
  }
  if (tty) process.stdout.write('\n');
  const history = await ctx.client.history(userId);
  // Nothing live when we first looked: the user's last session may have ended a moment ago (or long
  // before); report how it ended rather than "no session".
  const ended = sessionId === undefined ? history[0] : history.find((h) => h.sessionId === sessionId);
  if (sessionId === undefined && ended === undefined)
    throw new NoSessionError(404, 'no_session', `User ${userId} has no live or ended session.`, undefined);
  if (ended === undefined) {
    print(ctx, { userId, sessionId, state: 'replaced' }, `${userId}: session ${sessionId} was replaced by a newer one`);
    return exitCodes.ok;
  }
  const when = sessionId === undefined ? ` at ${ended.endedAt}` : '';
  const why = ended.reason === undefined ? '' : ` (${ended.reason})`;
  const code = ended.exitCode === undefined ? '' : ` (exit code ${ended.exitCode})`;
  print(ctx, { userId, ...ended }, `${userId}: ${ended.state}${why}${code}, session ${ended.sessionId}${when}`);
  return endCodes[ended.state];
}

async function demo(ctx: Context, users: number): Promise<number> {
  const say = (line: string): void => (ctx.json ? undefined : ctx.out(line));
  const events: unknown[] = [];
  const event = (value: Record<string, unknown>): void => {
    events.push(value);
    if (ctx.json) ctx.out(JSON.stringify(value));
  };
  const names = Array.from(
    { length: users },
    (_, i) => `demo-${['alice', 'bob', 'carol', 'dave', 'erin', 'frank'][i % 6]}${i >= 6 ? i : ''}`,
  );
  say(`spawning a session for ${names.join(', ')}; the last one is capped at 3 s of lifetime and will expire`);
  const sessions = new Map<string, string>();
  for (const [i, userId] of names.entries()) {
    const last = i === names.length - 1;
    try {
      const { token } = await ctx.client.issueToken({
        userId,
        metadata: { durationMs: last ? 60_000 : 3000 + 1000 * i },
        ...(last ? { lifetimeMs: 3000 } : {}),
      });
      const admitted = await ctx.client.spawn(token);
      sessions.set(userId, admitted.sessionId);
      event({ userId, event: 'admitted', sessionId: admitted.sessionId, fence: admitted.fence });
      say(`  ${userId}: admitted, fence ${admitted.fence}, session ${admitted.sessionId}`);
    } catch (err) {
      event({ userId, event: 'refused', error: describeError(err) });
      say(`  ${userId}: ${describeError(err)}`);
    }
  }
  const first = names[0]!;
  say(`asking again for ${first} while the first session is live:`);
  try {
    await ctx.client.spawn((await ctx.client.issueToken({ userId: first })).token);
    say(`  ${first}: admitted (the first session had already ended)`);
  } catch (err) {
    event({ userId: first, event: 'refused', error: describeError(err) });
    say(`  ${first}: ${describeError(err)}`);
  }
  if (names.length > 1) {
    const second = names[1]!;
    say(`stopping ${second}, then asking again as soon as it has ended (the spawn throttle applies):`);
    await ctx.client.stopSession(second).catch(() => undefined);
    for (let i = 0; i < 100 && (await ctx.client.findSession(second))?.sessionId === sessions.get(second); i++) {
      await sleep(100);
    }
    try {
      const admitted = await ctx.client.spawn(
        (await ctx.client.issueToken({ userId: second, metadata: { durationMs: 2000 } })).token,
      );
      sessions.set(second, admitted.sessionId);
      say(`  ${second}: admitted again, fence ${admitted.fence} (the throttle was already open)`);
    } catch (err) {
      event({ userId: second, event: 'refused', error: describeError(err) });
      say(`  ${second}: ${describeError(err)}`);
    }
  }
  say('following every session to its end:');
  const pending = new Set(sessions.keys());
  const seen = new Map<string, string>();
  const deadline = Date.now() + 120_000;
  while (pending.size > 0 && Date.now() < deadline) {
    for (const userId of [...pending]) {
      const live = await ctx.client.findSession(userId);
      if (live !== undefined && live.sessionId === sessions.get(userId)) {
        if (seen.get(userId) !== live.state) {
          seen.set(userId, live.state);
          event({ userId, event: live.state, sessionId: live.sessionId, workerId: live.workerId });
          say(`  ${userId}: ${live.state}${live.workerId ? ` on ${live.workerId}` : ''}`);
        }
        continue;
      }
      const ended = (await ctx.client.history(userId)).find((h) => h.sessionId === sessions.get(userId));
      if (ended !== undefined) {
        pending.delete(userId);
        event({ userId, event: ended.state, sessionId: ended.sessionId, exitCode: ended.exitCode });
        say(`  ${userId}: ${ended.state}${ended.exitCode === undefined ? '' : ` (exit code ${ended.exitCode})`}`);
      }
    }
    if (pending.size > 0) await sleep(300);
  }
  if (pending.size > 0) {
    say(`still running after 2 minutes: ${[...pending].join(', ')} (are worker hosts running?)`);
    return exitCodes.unavailable;
  }
  say('done');
  return exitCodes.ok;
}

export async function main(
  argv: string[],
  out: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        key: { type: 'string' },
        json: { type: 'boolean', default: false },
        metadata: { type: 'string' },
        ttl: { type: 'string' },
        lifetime: { type: 'string' },
        user: { type: 'string' },
        users: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    process.stderr.write(`cq: ${(err as Error).message}\n\n${USAGE}`);
    return exitCodes.usage;
  }
  const { values, positionals } = parsed;
  const [command, argument] = positionals;
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined && !values.help ? exitCodes.usage : exitCodes.ok;
  }
  const baseUrl = values.url ?? process.env['CQ_API_URL'] ?? 'http://127.0.0.1:3000';
  const apiKey = values.key ?? process.env['CQ_API_KEY'];
  const ctx: Context = {
    client: new CoordinatorClient({ baseUrl, ...(apiKey === undefined ? {} : { apiKey }) }),
    json: values.json,
    out,
  };
  const need = (what: string): string => {
    if (argument === undefined) throw new UsageError(`${command} needs ${what}`);
    return argument;
  };
  try {
    switch (command) {
      case 'token': {
        const metadata = parseMetadata(values.metadata);
        const ttlMs = parseIntOption(values.ttl, 'ttl');
        const lifetimeMs = parseIntOption(values.lifetime, 'lifetime');
        const issued = await ctx.client.issueToken({
          userId: need('a user id'),
          ...(metadata ? { metadata } : {}),
          ...(ttlMs ? { ttlMs } : {}),
          ...(lifetimeMs ? { lifetimeMs } : {}),
        });
        print(ctx, issued, issued.token);
        return exitCodes.ok;
      }
      case 'spawn': {
        let token = argument;
        if (values.user !== undefined) {
          const metadata = parseMetadata(values.metadata);
          const lifetimeMs = parseIntOption(values.lifetime, 'lifetime');
          token = (
            await ctx.client.issueToken({
              userId: values.user,
              ...(metadata ? { metadata } : {}),
              ...(lifetimeMs ? { lifetimeMs } : {}),
            })
          ).token;
        }
        if (token === undefined) throw new UsageError('spawn needs a token, or --user <userId>');
        const admitted = await ctx.client.spawn(token);
        print(
          ctx,
          admitted,
          `${admitted.userId}: admitted, fence ${admitted.fence}, session ${admitted.sessionId}, lifetime ${duration(admitted.lifetimeMs)}`,
        );
        return exitCodes.ok;
      }
      case 'status': {
        const session = await ctx.client.getSession(need('a user id'));
        print(ctx, session, describeSession(session));
        return exitCodes.ok;
      }
      case 'extend': {
        const userId = need('a user id and a lifetime in milliseconds');
        const ms = positionals[2];
        if (ms === undefined) throw new UsageError('extend needs a user id and a lifetime in milliseconds');
        if (!/^\d+$/.test(ms) || Number(ms) < 1)
          throw new UsageError(`the lifetime must be a whole number of milliseconds, at least 1 (got "${ms}")`);
        const session = await ctx.client.extend(userId, Number(ms));
        print(ctx, session, describeSession(session));
        return exitCodes.ok;
      }
      case 'stop': {
        const stopped = await ctx.client.stopSession(need('a user id'));
        print(ctx, stopped, `${stopped.userId}: ${stopped.state}, session ${stopped.sessionId}`);
        return exitCodes.ok;
      }
      case 'history': {
        const sessions = await ctx.client.history(need('a user id'));
        if (ctx.json) ctx.out(JSON.stringify({ sessions }));
        else if (sessions.length === 0) ctx.out('no ended sessions');
        else
          ctx.out(
            table([
              ['ENDED', 'STATE', 'FENCE', 'EXIT', 'WORKER', 'SESSION'],
              ...sessions.map((s) => [
                s.endedAt,
                s.reason === undefined ? s.state : `${s.state} (${s.reason})`,
                String(s.fence),
                s.exitCode === undefined ? '-' : String(s.exitCode),
                s.workerId ?? '-',
                s.sessionId,
              ]),
            ]),
          );
        return exitCodes.ok;
      }
      case 'watch':
        return await watch(ctx, need('a user id'));
      case 'hosts': {
        const { hosts, freeSlots } = await ctx.client.hosts();
        if (ctx.json) ctx.out(JSON.stringify({ hosts, freeSlots }));
        else {
          const now = Date.now();
          if (hosts.length === 0) ctx.out('no live worker hosts');
          else
            ctx.out(
              table([
                ['HOST', 'STATE', 'BUSY', 'SLOTS', 'CONTAINMENT', 'HEARTBEAT', 'UP SINCE'],
                ...hosts.map((h) => [
                  h.workerId,
                  h.state,
                  String(h.busy),
                  String(h.slots),
                  h.containment,
                  `${duration(now - Date.parse(h.heartbeatAt))} ago`,
                  h.startedAt,
                ]),
              ]),
            );
          ctx.out(`free slots: ${freeSlots}`);
        }
        return exitCodes.ok;
      }
      case 'drain': {
        const host = await ctx.client.drainHost(need('a worker host id'));
        print(
          ctx,
          host,
          `${host.workerId}: draining, ${host.busy} session(s) left to end on their own; it exits when they have`,
        );
        return exitCodes.ok;
      }
      case 'demo': {
        const users = parseIntOption(values.users, 'users') ?? 3;
        if (users < 1 || users > 20) throw new UsageError('--users must be from 1 to 20');
        return await demo(ctx, users);
      }
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`cq: ${err.message}\n\n${USAGE}`);
      return exitCodes.usage;
    }
    if (ctx.json && err instanceof ApiError)
      process.stderr.write(
        `${JSON.stringify({ error: { code: err.code, message: err.message, status: err.status } })}\n`,
      );
    else process.stderr.write(`${describeError(err)}\n`);
    return exitCodeOf(err);
  }
}
