// What a page of the session list costs Redis (GET /v1/sessions's walk), with 100, 10,000 and 100,000
// live sessions, and the dashboard's refresh before (every slot's index read, then a page of sessions) and
// after (a page of the list): Redis commands and µs (INFO commandstats, as redis-cost counts them).
import { Coordinator, type ListPosition, type SessionView } from '@cq/coordinator';
import type { RedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { benchRedis } from './redis.js';

/** One measurement: every command Redis ran (scripts' inside ones included) and the µs it counted. */
export interface ListCost {
  readonly commands: number;
  readonly us: number;
}

export interface SessionListRow {
  readonly sessions: number;
  /** The first page of 100, and one from the middle of the walk. */
  readonly firstPage: ListCost;
  readonly middlePage: ListCost;
  /** A page of 100 with a label filter that a tenth of the sessions carry. */
  readonly filteredPage: ListCost & { readonly found: number };
  /** The dashboard's refresh: the way it was (2 × 16,384 index reads and 50 session reads) and now. */
  readonly dashboardBefore: ListCost;
  readonly dashboardAfter: ListCost;
}

export interface SessionListBench {
  readonly rows: SessionListRow[];
}

/**
 * Commands and µs Redis counted while `during` ran (after CONFIG RESETSTAT; the observer's own left out):
 * every command, those run inside scripts included; µs of the top-level ones named in `topLevel` only
 * (a script's µs already holds those of the commands it ran).
 */
async function costDuring(
  observer: Redis,
  topLevel: ReadonlySet<string>,
  during: () => Promise<unknown>,
): Promise<ListCost> {
  await observer.config('RESETSTAT');
  await during();
  let commands = 0;
  let usec = 0;
  for (const [, name, calls, us] of (await observer.info('commandstats')).matchAll(
    /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm,
  )) {
    if (name === 'config|resetstat' || name === 'info') continue;
    commands += Number(calls);
    if (topLevel.has(name!)) usec += Number(us);
  }
  return { commands, us: usec };
}

/** A list page's top-level commands: the directory, each slot's index and `listed` key, the scripts (readSession, unlisting). */
const PAGE_COMMANDS = new Set(['zrangebyscore', 'zrange', 'get', 'evalsha']);
/** The old dashboard's: every slot's index and recent endings, then readSession for a page. */
const OLD_DASHBOARD_COMMANDS = new Set(['zrange', 'lrange', 'evalsha']);
/** The hosts and the capacity: the hosts' index (and a record each: none here), the capacity script. */
const HOSTS_COMMANDS = new Set(['zrange', 'hgetall', 'evalsha']);

const sum = (a: ListCost, b: ListCost): ListCost => ({ commands: a.commands + b.commands, us: a.us + b.us });

/** Runs `work(k)` for k = 0 … n-1 from 50 concurrent loops. */
async function concurrently(n: number, work: (k: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < n) await work(next++);
    }),
  );
}

/** Walks the whole list in pages of 100, answering the position halfway through. */
async function middleOf(c: Coordinator, total: number): Promise<ListPosition | undefined> {
  let from: ListPosition | undefined;
  let seen = 0;
  while (seen < total / 2) {
    const page = await c.sessions.list({}, { limit: 100, ...(from === undefined ? {} : { from }) });
    seen += page.sessions.length;
    if (page.next === undefined) return from;
    from = page.next;
  }
  return from;
}

/** The dashboard's refresh as it was before the list: every slot's index, then the first 50 users' sessions. */
async function oldDashboardRefresh(c: Coordinator): Promise<SessionView[]> {
  const index = await c.readIndex();
  const page = index.live.sort((a, b) => (a.userId < b.userId ? -1 : 1)).slice(0, 50);
  const sessions = await Promise.all(page.map((u) => c.sessions.settleAndRead(u.userId)));
  return sessions.filter((s): s is SessionView => s !== undefined);
}

/** Runs the section on a Redis of its own; `quick`: 100 and 1,000 sessions only. */
export async function benchSessionList(quick: boolean): Promise<SessionListBench> {
  const sizes = quick ? [100, 1000] : [100, 10_000, 100_000];
  const server: RedisServer = await benchRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
  const observer = new Redis(server.url, { maxRetriesPerRequest: 1 });
  const rows: SessionListRow[] = [];
  try {
    for (const total of sizes) {
      await observer.flushall('SYNC');
      const c = new Coordinator({
        redis,
        keyPrefix: `list${total}`,
        policy: { tokenLimit: 1_000_000, spawnIntervalMs: 1, spawnBurst: 1_000_000 },
      });
      // Real admissions: each session as the API makes it (one in ten labelled `tenth=yes`).
      await concurrently(total, async (k) => {
        const issued = await c.tokens.issue(`user-${k}`, k % 10 === 0 ? { labels: { tenth: 'yes' } } : {});
        if (issued.outcome !== 'issued') throw new Error('session-list bench: a token was not issued');
        const admitted = await c.sessions.admit(issued.token);
        if (admitted.outcome !== 'admitted') throw new Error(`session-list bench: ${admitted.outcome}`);
      });
      await c.sessions.list({}, { limit: 100 }); // scripts loaded, connections warm
      const middle = await middleOf(c, total);
      const firstPage = await costDuring(observer, PAGE_COMMANDS, () => c.sessions.list({}, { limit: 100 }));
      const middlePage = await costDuring(observer, PAGE_COMMANDS, () =>
        c.sessions.list({}, { limit: 100, ...(middle === undefined ? {} : { from: middle }) }),
      );
      let found = 0;
      const filtered = await costDuring(observer, PAGE_COMMANDS, async () => {
        found = (await c.sessions.list({ labels: { tenth: 'yes' } }, { limit: 100 })).sessions.length;
      });
      await oldDashboardRefresh(c);
      const hosts = await costDuring(observer, HOSTS_COMMANDS, () =>
        Promise.all([c.workers.list(), c.workers.capacity()]),
      );
      const dashboardBefore = sum(
        await costDuring(observer, OLD_DASHBOARD_COMMANDS, () => oldDashboardRefresh(c)),
        hosts,
      );
      const dashboardAfter = sum(
        await costDuring(observer, PAGE_COMMANDS, () => c.sessions.list({}, { limit: 50 })),
        hosts,
      );
      rows.push({
        sessions: total,
        firstPage,
        middlePage,
        filteredPage: { ...filtered, found },
        dashboardBefore,
        dashboardAfter,
      });
    }
  } finally {
    redis.disconnect();
    observer.disconnect();
    await server.stop();
  }
  return { rows };
}
