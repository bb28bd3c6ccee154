import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EndedSession, Hosts } from '@cq/contract';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { exitCodes } from './exit-codes.js';
import { main } from './main.js';
import { attacks, forgedLine, TERMINAL_CONTROL } from './test-support/terminal-attacks.js';

/** The API's answers, as the contract shapes them (what the CLI prints is all this tests). */
const hosts: Hosts = {
  hosts: [
    {
      workerId: 'host-ns',
      pool: 'default',
      state: 'active',
      slots: 4,
      busy: 1,
      heartbeatAt: new Date().toISOString(),
      startedAt: '2026-11-22T10:00:00.000Z',
      containment: 'namespace',
      isolation: { network: 'none', filesystem: 'private', cpus: 0.5 },
    },
    {
      workerId: 'host-pg',
      pool: 'gpu',
      state: 'draining',
      slots: 2,
      busy: 0,
      heartbeatAt: new Date().toISOString(),
      startedAt: '2026-11-22T10:00:00.000Z',
      containment: 'group',
      isolation: { network: 'host', filesystem: 'shared', cpus: null },
    },
  ],
  freeSlots: 3,
};

const history: { sessions: EndedSession[] } = {
  sessions: [
    {
      sessionId: 's-oom',
      fence: 2,
      state: 'failed',
      reason: 'out_of_memory',
      endedAt: '2026-11-22T10:05:00.000Z',
      exitCode: 137,
      pool: 'default',
      labels: {},
    },
    {
      sessionId: 's-ok',
      fence: 1,
      state: 'completed',
      endedAt: '2026-11-22T10:01:00.000Z',
      exitCode: 0,
      pool: 'default',
      labels: {},
    },
  ],
};

const idleHistory = {
  sessions: [
    {
      sessionId: 's-idle',
      fence: 4,
      state: 'stopped',
      reason: 'idle',
      workerId: 'host-1',
      endedAt: '2026-11-22T11:00:00.000Z',
      exitCode: 143,
    },
  ],
};

/** A running session with an idle timeout of 60 s, last active 15 s ago (times relative to now). */
function idleSession() {
  const now = Date.now();
  return {
    sessionId: 's-live',
    userId: 'ivy',
    fence: 5,
    state: 'running',
    ready: false,
    workerId: 'host-1',
    startedAt: new Date(now - 20_000).toISOString(),
    deadline: new Date(now + 600_000).toISOString(),
    idleTimeoutMs: 60_000,
    lastActivityAt: new Date(now - 15_000).toISOString(),
    pool: 'gpu',
    labels: { team: 'a', tier: 'x' },
  };
}

/** A running session that has announced readiness (`ready: true`, an endpoint). */
const readySession = {
  sessionId: 's-rey',
  userId: 'rey',
  fence: 3,
  state: 'running',
  ready: true,
  endpoint: '10.0.0.7:8080',
  workerId: 'host-1',
  startedAt: '2026-11-22T12:00:00.000Z',
};

/** The same session's event stream: its current state first (the API types it `ready`), then its end. */
const readyEvents = [
  {
    type: 'ready',
    sessionId: 's-rey',
    userId: 'rey',
    fence: 3,
    at: '2026-11-22T12:00:01.000Z',
    workerId: 'host-1',
    endpoint: '10.0.0.7:8080',
  },
  { type: 'completed', sessionId: 's-rey', userId: 'rey', fence: 3, at: '2026-11-22T12:00:09.000Z', exitCode: 0 },
];

/** Every attack on the terminal, raw as a hostile session writes it and as `cq` shows it. */
const hostile = [...attacks, forgedLine];
const hostileRaw = hostile.map(([, raw]) => raw).join(' ');
const hostileShown = hostile.map(([, , shown]) => shown).join(' ');

/** A ready session whose endpoint and host id (and so on) carry every attack. */
const malSession = {
  sessionId: 's-mal',
  userId: 'mal',
  fence: 7,
  state: 'running',
  ready: true,
  endpoint: `10.0.0.7:8080 ${hostileRaw}`,
  workerId: 'host-1\r\x1b[1A',
  startedAt: '2026-11-22T12:00:00.000Z',
};

/** How `cq` opens a line about that session. */
const malShown = `mal: running (ready), fence 7, session s-mal, on host-1\\r\\x1b[1A, at 10.0.0.7:8080 ${hostileShown}`;

/** Its output: a line per attack, stdout and stderr in turn (the API keeps the text as the session wrote it). */
const malLines = hostile.map(([, raw], i) => ({
  id: `1-${i}`,
  at: `2026-11-22T12:00:${String(i).padStart(2, '0')}.000Z`,
  stream: i % 2 === 0 ? 'stdout' : 'stderr',
  line: `before ${raw} after`,
}));

/** How `cq logs` prints those lines: one printed line per line, each attack a visible escape. */
const malLinesShown = hostile.map(
  ([, , shown], i) => `${malLines[i]!.at} ${i % 2 === 0 ? 'out' : 'err'} before ${shown} after`,
);

/** Its event stream: its current state (with the endpoint), then its end. */
const malEvents = [
  {
    type: 'ready',
    sessionId: 's-mal',
    userId: 'mal',
    fence: 7,
    at: '2026-11-22T12:00:01.000Z',
    workerId: malSession.workerId,
    endpoint: malSession.endpoint,
  },
  { type: 'completed', sessionId: 's-mal', userId: 'mal', fence: 7, at: '2026-11-22T12:00:09.000Z', exitCode: 0 },
];

/** A token of the coordinator's shape, v1.<base64url(userId)>.<43 base64url characters>, for zed. */
const zedToken = `v1.${Buffer.from('zed').toString('base64url')}.${'A'.repeat(43)}`;

/** An error answer whose message tries the attacks on stderr. */
const hostileError = { code: 'internal', message: `failed ${hostileRaw}` };

/** Server-sent events as the API writes them: `id` (when given), `event`, `data` (JSON) and a blank line each. */
function sse(messages: ReadonlyArray<{ event: string; data: unknown; id?: string }>): string {
  return messages
    .map(
      ({ event, data, id }) =>
        `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`,
    )
    .join('');
}

/** An ended session as a user's history keeps it. */
function ended(
  sessionId: string,
  fence: number,
  state: EndedSession['state'],
  extra: Partial<EndedSession> = {},
): EndedSession {
  return { sessionId, fence, state, endedAt: '2026-11-22T13:00:00.000Z', pool: 'default', labels: {}, ...extra };
}

/** A session event with the fields every event carries. */
function event(type: string, userId: string, sessionId: string, fence: number, extra: Record<string, unknown> = {}) {
  return { type, sessionId, userId, fence, at: '2026-11-22T13:00:00.000Z', pool: 'default', labels: {}, ...extra };
}

/**
 * Users with no live session whose next session the fake streams. Their history is `before` until their
 * stream is open and the CLI has read the history again (what `watch` does once the stream is open); the
 * stream then sends `events` and ends, and the history is `after`. Without `events` the session came and
 * went before the stream opened: the stream stays silent and the history read then is already `after`.
 */
const nextSessions: Record<
  string,
  {
    before: EndedSession[];
    after: EndedSession[];
    events?: ReturnType<typeof event>[];
    held?: ServerResponse;
    done?: boolean;
  }
> = {
  neo: {
    before: [],
    after: [ended('s-neo', 1, 'completed', { exitCode: 0 })],
    events: [
      event('pending', 'neo', 's-neo', 1, { lifetimeMs: 60_000 }),
      event('running', 'neo', 's-neo', 1, { workerId: 'host-1' }),
      event('completed', 'neo', 's-neo', 1, { workerId: 'host-1', exitCode: 0 }),
    ],
  },
  nia: {
    before: [ended('s-nia-1', 1, 'stopped', { exitCode: 143, endedAt: '2026-11-22T11:00:00.000Z' })],
    after: [
      ended('s-nia-2', 2, 'expired', { exitCode: 143 }),
      ended('s-nia-1', 1, 'stopped', { exitCode: 143, endedAt: '2026-11-22T11:00:00.000Z' }),
    ],
    events: [
      event('pending', 'nia', 's-nia-2', 2),
      event('running', 'nia', 's-nia-2', 2, { workerId: 'host-2' }),
      event('expired', 'nia', 's-nia-2', 2, { workerId: 'host-2', exitCode: 143 }),
    ],
  },
  // The first admission is rolled back (withdrawn); the user's stream goes on with the next session.
  wes: {
    before: [],
    after: [ended('s-wes-2', 2, 'completed', { exitCode: 0 })],
    events: [
      event('pending', 'wes', 's-wes-1', 1),
      event('withdrawn', 'wes', 's-wes-1', 1),
      event('pending', 'wes', 's-wes-2', 2),
      event('completed', 'wes', 's-wes-2', 2, { exitCode: 0 }),
    ],
  },
  qui: { before: [], after: [ended('s-qui', 1, 'lost', { reason: 'not_claimed' })] },
};

/** Every session's events (`GET /v1/events`), each with its id; a hostile session's among them. */
const allEvents = [
  { ...event('pending', 'ann', 's-a', 1), id: 'e-1' },
  { ...event('ready', 'mal', 's-mal', 7, { workerId: malSession.workerId, endpoint: malSession.endpoint }), id: 'e-2' },
  { ...event('failed', 'ann', 's-a', 1, { workerId: 'host-1', exitCode: 137, reason: 'out_of_memory' }), id: 'e-3' },
];

/** How `cq events` prints them. */
const allEventsShown = [
  '2026-11-22T13:00:00.000Z ann: pending, fence 1, session s-a, pool default',
  `2026-11-22T13:00:00.000Z ${malShown}, pool default`,
  '2026-11-22T13:00:00.000Z ann: failed (out_of_memory) (exit code 137), fence 1, session s-a, on host-1, pool default',
];

/** What the fake was asked, in order. */
const requests: Array<{ method: string; url: string; body: unknown; lastEventId: string | undefined }> = [];

/** The 409 the API answers a call whose `sessionId` is not the live session. */
const mismatch = {
  error: { code: 'session_mismatch', message: 'The live session of ivy is s-live, not s-old; nothing changed.' },
};

/** Answers by method and path (with its query), before the method-blind tables below. */
const byMethod: Record<string, (body: { labels?: Record<string, string | null> }) => [number, unknown?]> = {
  'POST /v1/users/ivy/session/activity': () => [204],
  'POST /v1/users/ivy/session/activity?sessionId=s-live': () => [204],
  'POST /v1/users/ivy/session/activity?sessionId=s-old': () => [409, mismatch],
  'PATCH /v1/users/ivy/session': (body) => {
    const labels: Record<string, string> = { ...idleSession().labels };
    for (const [key, value] of Object.entries(body.labels ?? {}))
      if (value === null) delete labels[key];
      else labels[key] = value;
    return [200, { ...idleSession(), labels }];
  },
  'PATCH /v1/users/ivy/session?sessionId=s-old': () => [409, mismatch],
  'DELETE /v1/users/rey/session': () => [202, { sessionId: 's-rey', userId: 'rey', state: 'stopping' }],
  'DELETE /v1/users/rey/session?sessionId=s-rey': () => [202, { sessionId: 's-rey', userId: 'rey', state: 'stopping' }],
  'GET /v1/sessions/s-live': () => [200, idleSession()],
  'GET /v1/sessions/s-oom': () => [200, { ...history.sessions[0], userId: 'ann' }],
};

/** Reads a request's JSON body; undefined when it has none. */
async function bodyOf(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString();
  return text === '' ? undefined : JSON.parse(text);
}

/** The printed text holds no character a terminal acts on (lines are split at the newlines between them). */
function expectInert(lines: readonly string[]): void {
  for (const line of lines) expect(line).not.toMatch(TERMINAL_CONTROL);
}

describe('cq against an API', () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    server = createServer((req, res) => void answer(req, res));
    async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const lastEventId = req.headers['last-event-id'];
      const body = await bodyOf(req);
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        body,
        lastEventId: lastEventId as string | undefined,
      });
      // A spawn is sent with its token alone, no key.
      if (req.headers.authorization !== 'Bearer k' && req.url !== '/v1/spawn') {
        // The contract's 401, with the API's own message (which speaks HTTP, not the CLI).
        res.writeHead(401, { 'content-type': 'application/json' });
        const message = 'Send a service key as Authorization: Bearer <key>.';
        res.end(JSON.stringify({ error: { code: 'unauthorized', message } }));
        return;
      }
      const streams: Record<string, string> = {
        '/v1/users/rey/session/events': sse(readyEvents.map((e) => ({ event: e.type, data: e }))),
        '/v1/users/mal/session/events': sse(malEvents.map((e) => ({ event: e.type, data: e }))),
        '/v1/users/mal/sessions/s-mal/logs': sse([
          ...malLines.map((line) => ({ event: 'line', data: line })),
          { event: 'end', data: { sessionId: 's-mal' } },
        ]),
      };
      const [, nextUser, nextRoute] = /^\/v1\/users\/(\w+)\/(history|session\/events)$/.exec(req.url ?? '') ?? [];
      const next = nextSessions[nextUser ?? ''];
      if (next !== undefined && nextRoute === 'session/events') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        next.held = res;
        return;
      }
      if (next !== undefined && nextRoute === 'history') {
        const sessions =
          next.done === true || (next.held !== undefined && next.events === undefined) ? next.after : next.before;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ sessions }));
        if (next.held !== undefined && next.events !== undefined && next.done !== true) {
          next.done = true;
          next.held.end(sse(next.events.map((e) => ({ event: e.type, data: e }))));
        }
        return;
      }
      if (req.url === '/v1/events' && req.headers.accept === 'text/event-stream') {
        // From now (no Last-Event-ID), after an id, or from an id too old (an error event, then from now);
        // resuming after the last one is refused, which ends the command.
        const at = allEvents.findIndex((e) => e.id === lastEventId);
        if (lastEventId === 'e-3') {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { code: 'invalid_request', message: 'Last-Event-ID e-3 is refused here' } }));
          return;
        }
        const expired = { event: 'error', data: { code: 'events_expired', message: 'Events before e-0 are gone.' } };
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(
          sse([
            ...(lastEventId === 'e-0' ? [expired] : []),
            ...allEvents.slice(at + 1).map(({ id, ...e }) => ({ event: e.type, data: e, id })),
          ]),
        );
        return;
      }
      const method = byMethod[`${req.method} ${req.url}`];
      if (method !== undefined) {
        const [status, answer] = method(body as { labels?: Record<string, string | null> });
        res.writeHead(status, answer === undefined ? {} : { 'content-type': 'application/json' });
        res.end(answer === undefined ? undefined : JSON.stringify(answer));
        return;
      }
      const stream = streams[req.url ?? ''];
      if (stream !== undefined && req.headers.accept === 'text/event-stream') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(stream);
        return;
      }
      if (req.url === '/v1/hosts/h-1/drain') {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            error: {
              code: 'forbidden',
              message: 'The key "culler" lacks the scope "hosts:write", which POST /v1/hosts/:workerId/drain needs.',
              scope: 'hosts:write',
            },
          }),
        );
        return;
      }
      if (req.url === '/v1/users/boom/session') {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: hostileError }));
        return;
      }
      const bodies: Record<string, unknown> = {
        '/v1/users/rey/session': readySession,
        '/v1/users/rey/history': {
          sessions: [
            { sessionId: 's-rey', fence: 3, state: 'completed', endedAt: '2026-11-22T12:00:09.000Z', exitCode: 0 },
          ],
        },
        '/v1/hosts': hosts,
        '/v1/whoami': { name: 'culler', scopes: ['sessions:read', 'sessions:write'] },
        '/v1/pools': {
          pools: [
            { pool: 'cpu', hosts: 2, slots: 8, busy: 3, free: 5, pending: 0 },
            { pool: 'gpu', hosts: 1, slots: 2, busy: 2, free: 0, pending: 4 },
          ],
        },
        '/v1/users/ann/history': history,
        '/v1/users/ida/history': idleHistory,
        '/v1/users/ivy/session': idleSession(),
        '/v1/users/mal/session': malSession,
        '/v1/users/mal/history': {
          sessions: [
            { sessionId: 's-mal', fence: 7, state: 'completed', endedAt: '2026-11-22T12:00:09.000Z', exitCode: 0 },
          ],
        },
        '/v1/webhooks': {
          webhooks: [
            {
              id: 'wh_1',
              url: `https://hooks.example/${hostileRaw}`,
              events: [],
              createdAt: '2026-11-22T12:00:00.000Z',
            },
          ],
        },
        '/v1/webhooks/wh_1/deliveries': {
          deliveries: [
            {
              eventId: 'e-1',
              type: 'ready',
              attempt: 1,
              error: `refused ${hostileRaw}`,
              at: '2026-11-22T12:00:01.000Z',
            },
          ],
        },
        // The session list, in two pages, and a bulk stop (the fake ignores the method: POST for the stop).
        '/v1/sessions?label=job%3Dx': {
          sessions: [{ ...readySession, pool: 'gpu', labels: { job: 'x' } }],
          next: 'c2',
        },
        '/v1/sessions?label=job%3Dx&cursor=c2': {
          sessions: [{ ...malSession, pool: 'gpu', labels: { job: 'x', note: hostileRaw } }],
        },
        '/v1/sessions/stop': { matched: 2, stopping: 2, more: false },
        // A token, whatever was asked for, and its admission (the fake ignores the method: POST for both).
        '/v1/tokens': { token: zedToken, userId: 'zed', expiresAt: '2026-11-22T14:00:00.000Z' },
        '/v1/spawn': { sessionId: 's-zed', userId: 'zed', fence: 1, state: 'pending', lifetimeMs: 9000 },
        // Two pages, the second after the first's last line.
        '/v1/users/mal/sessions/s-mal/logs': { lines: malLines.slice(0, 4), droppedBytes: 0, more: true },
        '/v1/users/mal/sessions/s-mal/logs?after=1-3': { lines: malLines.slice(4), droppedBytes: 0, more: false },
      };
      const found = bodies[req.url ?? ''];
      // Anything else (ann's live session, for one) is a 404, as the API answers for a user without one.
      const status = found === undefined ? 404 : 200;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(found ?? { error: { code: 'no_session', message: `nothing at ${req.url}` } }));
    }
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );

  async function run(...argv: string[]): Promise<{ code: number; lines: string[] }> {
    const lines: string[] = [];
    const code = await main([...argv, '--url', url, '--key', 'k'], (line) => lines.push(...line.split('\n')));
    return { code, lines };
  }

  it.each([undefined, ''])(
    'without a key (CQ_API_KEY %j), says to set CQ_API_KEY or pass --key and where the local key is, and exits 3',
    async (envKey) => {
      vi.stubEnv('CQ_API_KEY', envKey);
      try {
        const { code, stderr } = await runCapturing(['hosts', '--url', url]);
        expect(stderr.split('\n')).toHaveLength(2);
        expect(stderr).toMatch(/^unauthorized: no service key given: set CQ_API_KEY or pass --key /);
        expect(stderr).toContain('./scripts/up.sh keeps its key in .data/dev-api-key');
        expect(stderr).not.toContain('Authorization: Bearer');
        expect(code).toBe(exitCodes.unauthorized);
      } finally {
        vi.unstubAllEnvs();
      }
    },
  );

  it('with a wrong key, names where the key came from and the same fix; --json carries it as remedy', async () => {
    vi.stubEnv('CQ_API_KEY', 'wrong');
    try {
      const fromEnv = await runCapturing(['hosts', '--url', url]);
      expect(fromEnv.stderr).toMatch(
        new RegExp(
          `^unauthorized: the API at ${url} refused the service key from CQ_API_KEY: set CQ_API_KEY or pass --key `,
        ),
      );
      expect(fromEnv.code).toBe(exitCodes.unauthorized);
      const json = await runCapturing(['hosts', '--url', url, '--key', 'also-wrong', '--json']);
      const { error } = JSON.parse(json.stderr) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ code: 'unauthorized', status: 401 });
      expect(error['remedy']).toMatch(/refused the service key from --key: set CQ_API_KEY or pass --key .*dev-api-key/);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it("whoami prints the key's name and scopes", async () => {
    expect(await run('whoami')).toEqual({ code: exitCodes.ok, lines: ['culler: sessions:read, sessions:write'] });
    const json = await run('whoami', '--json');
    expect(JSON.parse(json.lines[0]!)).toEqual({ name: 'culler', scopes: ['sessions:read', 'sessions:write'] });
  });

  it('a 403 names the scope the key lacks and how to see its own, and exits 16', async () => {
    const { code, stderr } = await runCapturing(['drain', 'h-1', '--url', url, '--key', 'k']);
    expect(stderr).toBe(
      'forbidden: the key from --key lacks the scope "hosts:write" this command needs: use a key that has it, ' +
        'or "admin" (cq whoami shows this key\'s name and scopes)\n',
    );
    expect(code).toBe(exitCodes.forbidden);
  });

  it("hosts prints each host's pool, containment and isolation in columns of their own", async () => {
    const { code, lines } = await run('hosts');
    expect(code).toBe(exitCodes.ok);
    const [header, ns, pg] = lines.map((line) => line.split(/\s{2,}/));
    expect(header).toEqual([
      'HOST',
      'POOL',
      'STATE',
      'BUSY',
      'SLOTS',
      'CONTAINMENT',
      'ISOLATION',
      'HEARTBEAT',
      'UP SINCE',
    ]);
    const column = header!.indexOf('CONTAINMENT');
    const isolation = header!.indexOf('ISOLATION');
    expect([ns![0], ns![1], ns![column], ns![isolation]]).toEqual([
      'host-ns',
      'default',
      'namespace',
      'network none · files private · 0.5 CPU',
    ]);
    // A host that isolates neither its network nor its files says so.
    expect([pg![0], pg![1], pg![column], pg![isolation]]).toEqual([
      'host-pg',
      'gpu',
      'group',
      'network host · files shared · no CPU cap (not isolated: network, files)',
    ]);
    expect(lines.at(-1)).toBe('free slots: 3');
  });

  it('hosts --json gives each host its isolation as the API does', async () => {
    const { code, lines } = await run('hosts', '--json');
    expect(code).toBe(exitCodes.ok);
    const printed = JSON.parse(lines.join('\n')) as Hosts;
    expect(printed.hosts.map((h) => h.isolation)).toEqual([
      { network: 'none', filesystem: 'private', cpus: 0.5 },
      { network: 'host', filesystem: 'shared', cpus: null },
    ]);
  });

  it('pools prints every pool with its hosts, slots, busy, free and pending', async () => {
    const { code, lines } = await run('pools');
    expect(code).toBe(exitCodes.ok);
    expect(lines.map((line) => line.split(/\s{2,}/))).toEqual([
      ['POOL', 'HOSTS', 'SLOTS', 'BUSY', 'FREE', 'PENDING'],
      ['cpu', '2', '8', '3', '5', '0'],
      ['gpu', '1', '2', '2', '0', '4'],
    ]);
  });

  it('ls walks every page of the list and prints each session with its pool and labels, escaped; --json a line each', async () => {
    const { code, lines } = await run('ls', '--label', 'job=x');
    expect(code).toBe(exitCodes.ok);
    expect(lines).toHaveLength(3);
    // The user once, as the line about the session opens.
    expect(lines[0]).toMatch(/^rey: running \(ready\), fence 3, session s-rey, .*pool gpu {2}job=x$/);
    expect(lines[1]).toContain(`note=${hostileShown}`);
    expect(lines[2]).toBe('2 live sessions');
    expectInert(lines);
    const json = await run('ls', '--label', 'job=x', '--json');
    expect(json.lines.map((line) => JSON.parse(line).userId)).toEqual(['rey', 'mal']);
    expect((await run('ls', '--label', 'nokey')).code).toBe(exitCodes.usage);
    expect((await run('ls', '--state', 'ended')).code).toBe(exitCodes.usage);
  });

  it('stop --label stops what the filters match; stop with neither a user nor a filter is a usage error', async () => {
    expect(await run('stop', '--label', 'job=x')).toEqual({
      code: exitCodes.ok,
      lines: ['2 matched, 2 stopping or stopped'],
    });
    expect((await run('stop')).code).toBe(exitCodes.usage);
    expect((await run('stop', 'ann', '--label', 'job=x')).code).toBe(exitCodes.usage);
  });

  it('history prints a session its memory cap killed as failed (out_of_memory)', async () => {
    const { code, lines } = await run('history', 'ann');
    expect(code).toBe(exitCodes.ok);
    const rows = lines.map((line) => line.split(/\s{2,}/));
    expect(rows[0]).toEqual(['ENDED', 'STATE', 'FENCE', 'EXIT', 'WORKER', 'SESSION']);
    expect(rows[1]).toEqual(['2026-11-22T10:05:00.000Z', 'failed (out_of_memory)', '2', '137', '-', 's-oom']);
    expect(rows[2]![1]).toBe('completed');
  });

  it('status shows the idle timeout, the last activity and when the session would be idle', async () => {
    const { code, lines } = await run('status', 'ivy');
    expect(code).toBe(exitCodes.ok);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^ivy: running, fence 5, session s-live, on host-1, /);
    expect(lines[0]).toMatch(/, last active 15\.\d s ago, idle timeout 1 min 0 s \(idle in 4[45]\.\d s\)$/);
  });

  it('status and watch word a ready session alike: running (ready), at its endpoint', async () => {
    const status = await run('status', 'rey');
    expect(status.code).toBe(exitCodes.ok);
    expect(status.lines[0]).toMatch(
      /^rey: running \(ready\), fence 3, session s-rey, on host-1, at 10\.0\.0\.7:8080(, |$)/,
    );
    const tty = process.stdout.isTTY;
    process.stdout.isTTY = false;
    try {
      const watch = await run('watch', 'rey');
      expect(watch.lines).toEqual([
        'rey: running (ready), fence 3, session s-rey, on host-1, at 10.0.0.7:8080',
        'rey: completed (exit code 0), session s-rey',
      ]);
      expect(watch.code).toBe(exitCodes.ok);
    } finally {
      process.stdout.isTTY = tty;
    }
    // A running session that has not announced readiness is plain running.
    expect((await run('status', 'ivy')).lines[0]).toMatch(/^ivy: running, fence 5, /);
  });

  it('history and watch read a session stopped for idleness as stopped (idle)', async () => {
    const history = await run('history', 'ida');
    expect(history.lines.map((line) => line.split(/\s{2,}/))[1]).toEqual([
      '2026-11-22T11:00:00.000Z',
      'stopped (idle)',
      '4',
      '143',
      'host-1',
      's-idle',
    ]);
    const watch = await run('watch', 'ida');
    expect(watch.lines).toEqual(['ida: stopped (idle) (exit code 143), session s-idle at 2026-11-22T11:00:00.000Z']);
    expect(watch.code).toBe(12);
  });

  it.each([[['logs', 'mal']], [['logs', 'mal', '--follow']]])(
    "cq %j prints a hostile session's output as visible escapes, one printed line per line of output",
    async (argv) => {
      const { code, lines } = await run(...argv);
      expect(lines).toEqual(malLinesShown);
      expectInert(lines);
      expect(code).toBe(exitCodes.ok);
    },
  );

  it.each([[['logs', 'mal', '--json']], [['logs', 'mal', '--follow', '--json']]])(
    'cq %j prints each line exactly as the API sent it',
    async (argv) => {
      const { code, lines } = await run(...argv);
      expect(lines.map((line) => JSON.parse(line) as unknown)).toEqual(malLines);
      expect(code).toBe(exitCodes.ok);
    },
  );

  it('status prints an endpoint the session announced as visible escapes on one line; --json exactly', async () => {
    const status = await run('status', 'mal');
    expect(status.lines).toEqual([malShown]);
    expectInert(status.lines);
    const json = await run('status', 'mal', '--json');
    expect(json.lines.map((line) => JSON.parse(line) as unknown)).toEqual([malSession]);
  });

  it('watch on a terminal rewrites its status line with its own CR and erase, the text after them escaped', async () => {
    const tty = process.stdout.isTTY;
    process.stdout.isTTY = true;
    let written = '';
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written += String(chunk);
      return true;
    });
    let watch;
    try {
      watch = await run('watch', 'mal');
    } finally {
      write.mockRestore();
      process.stdout.isTTY = tty;
    }
    expect(written).toBe(`\r\x1b[2K${malShown}\n`);
    expect(watch.lines).toEqual(['mal: completed (exit code 0), session s-mal']);
    expect(watch.code).toBe(exitCodes.ok);
  });

  it('webhooks and their deliveries print a URL and a delivery error as visible escapes, one row each', async () => {
    for (const action of [[], ['list'], ['delete', 'wh_1'], ['deliveries', 'wh_1']]) {
      const from = requests.length;
      const refused = await runPlain('webhooks', ...action, '--events', 'ready');
      expect(refused.stderr, action.join(' ')).toBe(
        `cq: webhooks ${action[0] ?? 'list'} does not take --events (webhooks create does); run cq --help\n`,
      );
      expect(refused.code).toBe(exitCodes.usage);
      expect(asked(from)).toEqual([]);
    }
    const list = await run('webhooks');
    expect(list.lines[1]!.split(/\s{2,}/)).toEqual([
      'wh_1',
      `https://hooks.example/${hostileShown}`,
      'all',
      '2026-11-22T12:00:00.000Z',
    ]);
    const deliveries = await run('webhooks', 'deliveries', 'wh_1');
    expect(deliveries.lines[1]!.split(/\s{2,}/)).toEqual([
      '2026-11-22T12:00:01.000Z',
      'e-1',
      'ready',
      '1',
      `refused ${hostileShown}`,
      '-',
    ]);
    for (const { lines } of [list, deliveries]) {
      expect(lines).toHaveLength(2);
      expectInert(lines);
    }
  });

  it('prints an error message from the API on stderr as visible escapes, one line; --json exactly', async () => {
    const text = await runCapturing(['status', 'boom', '--url', url, '--key', 'k']);
    expect(text.stderr).toBe(`internal: failed ${hostileShown}\n`);
    expectInert([text.stderr.slice(0, -1)]);
    expect(text.code).toBe(exitCodes.rejected);
    const json = await runCapturing(['status', 'boom', '--url', url, '--key', 'k', '--json']);
    expect((JSON.parse(json.stderr) as { error: unknown }).error).toEqual({ ...hostileError, status: 500 });
  });

  /** `cq` with the fake's URL and key and stdout not a terminal (watch prints a line per change). */
  async function runPlain(...argv: string[]): Promise<{ code: number; lines: string[]; stderr: string }> {
    const tty = process.stdout.isTTY;
    process.stdout.isTTY = false;
    try {
      return await runCapturing([...argv, '--url', url, '--key', 'k']);
    } finally {
      process.stdout.isTTY = tty;
    }
  }

  /** The requests made since `from` (an index into the log), as `METHOD url`. */
  const asked = (from: number): string[] => requests.slice(from).map((r) => `${r.method} ${r.url}`);

  it('watch of a user who never had a session waits for the next one, says so once the stream is open, and follows it', async () => {
    const { code, lines, stderr } = await runPlain('watch', 'neo');
    expect(stderr).toBe('cq: neo has no live session; waiting for the next one (the stream is open)\n');
    expect(lines).toEqual([
      'neo: pending, fence 1, session s-neo',
      'neo: running, fence 1, session s-neo, on host-1',
      'neo: completed (exit code 0), session s-neo',
    ]);
    expect(code).toBe(exitCodes.ok);
  });

  it('watch of a user with an ended session says how it ended; --next waits for the next session instead', async () => {
    const last = await runPlain('watch', 'nia');
    expect(last.lines).toEqual(['nia: stopped (exit code 143), session s-nia-1 at 2026-11-22T11:00:00.000Z']);
    expect(last.stderr).toBe('');
    expect(last.code).toBe(12);
    const next = await runPlain('watch', 'nia', '--next');
    expect(next.stderr).toContain('waiting for the next one');
    expect(next.lines).toEqual([
      'nia: pending, fence 2, session s-nia-2',
      'nia: running, fence 2, session s-nia-2, on host-2',
      'nia: expired (exit code 143), session s-nia-2',
    ]);
    expect(next.code).toBe(11);
  });

  it('watch shows a withdrawn admission and goes on with the next session', async () => {
    const { code, lines } = await runPlain('watch', 'wes');
    expect(lines).toEqual([
      'wes: pending, fence 1, session s-wes-1',
      'wes: withdrawn, fence 1, session s-wes-1',
      'wes: pending, fence 2, session s-wes-2',
      'wes: completed (exit code 0), session s-wes-2',
    ]);
    expect(code).toBe(exitCodes.ok);
  });

  it('watch reports a next session that came and went before its stream opened, from the history', async () => {
    const { code, lines } = await runPlain('watch', 'qui');
    expect(lines).toEqual(['qui: lost (not_claimed), session s-qui']);
    expect(code).toBe(13);
  });

  it('activity records activity (with --session, only for that session); 404 exits 5, session_mismatch 9', async () => {
    const from = requests.length;
    expect(await run('activity', 'ivy')).toEqual({
      code: exitCodes.ok,
      lines: ["ivy: activity recorded; a running session's idle clock starts again"],
    });
    expect(JSON.parse((await run('activity', 'ivy', '--session', 's-live', '--json')).lines[0]!)).toEqual({
      userId: 'ivy',
      sessionId: 's-live',
      activity: 'recorded',
    });
    expect(asked(from)).toEqual([
      'POST /v1/users/ivy/session/activity',
      'POST /v1/users/ivy/session/activity?sessionId=s-live',
    ]);
    const mismatched = await runPlain('activity', 'ivy', '--session', 's-old');
    expect(mismatched.stderr).toBe(`session_mismatch: ${mismatch.error.message}\n`);
    expect(mismatched.code).toBe(exitCodes.rejected);
    expect((await runPlain('activity', 'ann')).code).toBe(exitCodes.noSession);
    expect((await runPlain('activity')).code).toBe(exitCodes.usage);
  });

  it('labels sets k=v and removes k- in one PATCH and prints the labels the session now has; alone, prints them', async () => {
    const from = requests.length;
    const changed = await run('labels', 'ivy', 'team=b', 'tier-', 'note=a=b', 'path/key-');
    expect(changed).toEqual({ code: exitCodes.ok, lines: ['ivy: labels team=b note=a=b, session s-live'] });
    expect(requests[from]).toMatchObject({
      method: 'PATCH',
      url: '/v1/users/ivy/session',
      body: { labels: { team: 'b', tier: null, note: 'a=b', 'path/key': null } },
    });
    expect((await run('labels', 'ivy')).lines).toEqual(['ivy: labels team=a tier=x, session s-live']);
    expect(requests.at(-1)).toMatchObject({ method: 'GET', url: '/v1/users/ivy/session' });
    expect((await runPlain('labels', 'ivy', 'team=b', '--session', 's-old')).code).toBe(exitCodes.rejected);
    // Reading the labels has nothing to make conditional: --session there is refused, not ignored.
    const reading = await runPlain('labels', 'ivy', '--session', 's-live');
    expect(reading.stderr).toBe(
      'cq: labels --session needs changes (k=v, k-); cq session <sessionId> prints a session by its id; run cq --help\n',
    );
    expect(reading.code).toBe(exitCodes.usage);
    for (const bad of ['=x', 'team', '-']) {
      const usage = await runPlain('labels', 'ivy', bad);
      expect(usage.stderr, bad).toBe(
        `cq: labels takes key=value to set a label and key- to remove one (got "${bad}"); run cq --help\n`,
      );
      expect(usage.code).toBe(exitCodes.usage);
    }
  });

  it('session prints a session by its id, live or ended, with its pool and labels; --json as the API sent it', async () => {
    const live = await run('session', 's-live');
    expect(live.lines).toHaveLength(1);
    expect(live.lines[0]).toMatch(
      /^ivy: running, fence 5, session s-live, on host-1, .*, pool gpu, labels team=a tier=x$/,
    );
    expect(await run('session', 's-oom')).toEqual({
      code: exitCodes.ok,
      lines: [
        'ann: failed (out_of_memory) (exit code 137), session s-oom, ended at 2026-11-22T10:05:00.000Z, pool default, no labels',
      ],
    });
    expect(JSON.parse((await run('session', 's-oom', '--json')).lines[0]!)).toEqual({
      ...history.sessions[0],
      userId: 'ann',
    });
    expect((await runPlain('session', 's-gone')).code).toBe(exitCodes.noSession);
    expect((await runPlain('session')).stderr).toBe('cq: session needs a session id; run cq --help\n');
  });

  it("stop --user stops that user's session as stop <userId> does; with another filter it is a bulk filter", async () => {
    const from = requests.length;
    expect(await run('stop', '--user', 'rey')).toEqual({ code: exitCodes.ok, lines: ['rey: stopping, session s-rey'] });
    expect((await run('stop', 'rey', '--session', 's-rey')).lines).toEqual(['rey: stopping, session s-rey']);
    expect((await run('stop', '--user', 'rey', '--session', 's-rey')).code).toBe(exitCodes.ok);
    expect((await run('stop', '--user', 'rey', '--label', 'job=x')).lines).toEqual([
      '2 matched, 2 stopping or stopped',
    ]);
    expect(asked(from)).toEqual([
      'DELETE /v1/users/rey/session',
      'DELETE /v1/users/rey/session?sessionId=s-rey',
      'DELETE /v1/users/rey/session?sessionId=s-rey',
      'POST /v1/sessions/stop',
    ]);
    expect(requests.at(-1)!.body).toEqual({ userId: 'rey', labels: { job: 'x' } });
    expect((await runPlain('stop', 'rey', '--user', 'rey')).code).toBe(exitCodes.usage);
    const sessionWithFilters = await runPlain('stop', '--label', 'job=x', '--session', 's-rey');
    expect(sessionWithFilters.stderr).toContain("--session names one user's session");
    expect(sessionWithFilters.code).toBe(exitCodes.usage);
  });

  it('spawn --user issues its token with every option token takes, the request token sends; spawn <token> admits it', async () => {
    const options = ['--pool', 'gpu', '--label', 'team=ml', '--label', 'tier=x', '--ttl', '5000', '--idle', '0'];
    options.push('--lifetime', '9000', '--metadata', '{"durationMs":1}');
    const admitted = ['zed: admitted, fence 1, session s-zed, lifetime 9.0 s'];
    const from = requests.length;
    expect(await run('spawn', '--user', 'zed', ...options)).toEqual({ code: exitCodes.ok, lines: admitted });
    expect(await run('token', 'zed', ...options)).toEqual({ code: exitCodes.ok, lines: [zedToken] });
    expect(await run('spawn', zedToken)).toEqual({ code: exitCodes.ok, lines: admitted });
    expect(asked(from)).toEqual(['POST /v1/tokens', 'POST /v1/spawn', 'POST /v1/tokens', 'POST /v1/spawn']);
    const issued = {
      userId: 'zed',
      pool: 'gpu',
      labels: { team: 'ml', tier: 'x' },
      ttlMs: 5000,
      idleTimeoutMs: 0,
      lifetimeMs: 9000,
      metadata: { durationMs: 1 },
    };
    expect(requests[from]!.body).toEqual(issued);
    expect(requests[from + 2]!.body).toEqual(issued);
    expect(requests[from + 1]!.body).toEqual({ token: zedToken });
    expect(requests[from + 3]!.body).toEqual({ token: zedToken });
  });

  it.each([
    [['spawn', 'alice'], '"alice" is not a spawn token; to spawn for a user, use cq spawn --user alice'],
    [
      ['spawn', 'ann@example.com'],
      '"ann@example.com" is not a spawn token; to spawn for a user, use cq spawn --user ann@example.com',
    ],
    // Cut short: no user id to suggest.
    [['spawn', 'v1.emVk.AAAA'], '"v1.emVk.AAAA" is not a spawn token (cq token <userId> prints one)'],
    [['spawn', 'not a user'], '"not a user" is not a spawn token (cq token <userId> prints one)'],
    [['spawn'], 'spawn needs a token, or --user <userId>'],
    [['spawn', zedToken, '--user', 'zed'], 'spawn takes a token or --user <userId>, not both'],
    [
      ['spawn', zedToken, '--pool', 'gpu'],
      'spawn <token> does not take --pool: the token says what it admits (spawn --user takes it)',
    ],
    [
      ['spawn', zedToken, '--label', 'a=b'],
      'spawn <token> does not take --label: the token says what it admits (spawn --user takes it)',
    ],
    [['spawn', '--user', 'zed', '--follow'], 'spawn does not take --follow'],
  ])('cq %j is a usage error, before any request: %s', async (argv, mistake) => {
    const from = requests.length;
    const { code, lines, stderr } = await runPlain(...argv);
    expect(stderr).toBe(`cq: ${mistake}; run cq --help\n`);
    expect(lines).toEqual([]);
    expect(code).toBe(exitCodes.usage);
    expect(asked(from)).toEqual([]);
  });

  it('events prints every session event as it comes, escaped, until the API refuses to resume the stream', async () => {
    const { code, lines, stderr } = await runPlain('events');
    expect(lines).toEqual(allEventsShown);
    expectInert(lines);
    expect(stderr).toBe(
      'cq: the event stream is open; each event prints as it happens (Ctrl-C stops)\n' +
        'invalid_request: Last-Event-ID e-3 is refused here\n',
    );
    expect(code).toBe(exitCodes.rejected);
    // The client resumed after the last event it printed.
    expect(requests.filter((r) => r.url === '/v1/events').at(-1)!.lastEventId).toBe('e-3');
  });

  it('events --after resumes after that id; an error event (events_expired) goes to stderr; --json prints each as sent', async () => {
    const from = requests.length;
    const after = await runPlain('events', '--after', 'e-1');
    expect(requests[from]).toMatchObject({ url: '/v1/events', lastEventId: 'e-1' });
    expect(after.lines).toEqual(allEventsShown.slice(1));
    const expired = await runPlain('events', '--after', 'e-0');
    expect(expired.stderr.split('\n').slice(0, 2)).toEqual([
      'cq: the event stream is open; each event prints as it happens (Ctrl-C stops)',
      'cq: events_expired: Events before e-0 are gone.',
    ]);
    expect(expired.lines).toEqual(allEventsShown);
    const json = await runPlain('events', '--json');
    expect(json.lines.map((line) => JSON.parse(line) as unknown)).toEqual(allEvents);
    expect(JSON.parse(json.stderr)).toEqual({
      error: { code: 'invalid_request', message: 'Last-Event-ID e-3 is refused here', status: 400 },
    });
  });

  it('watch, with no live session, says how the last one ended, out_of_memory included, and exits as failed', async () => {
    const { code, lines } = await run('watch', 'ann');
    expect(lines).toEqual(['ann: failed (out_of_memory) (exit code 137), session s-oom at 2026-11-22T10:05:00.000Z']);
    expect(code).toBe(10);
  });
});

/** Runs `cq` with `argv`; resolves with its exit code, its output lines and what it wrote to stderr. */
async function runCapturing(argv: string[]): Promise<{ code: number; lines: string[]; stderr: string }> {
  const lines: string[] = [];
  let stderr = '';
  const write = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  try {
    const code = await main(argv, (line) => lines.push(...line.split('\n')));
    return { code, lines, stderr };
  } finally {
    write.mockRestore();
  }
}

describe('cq with the API down', () => {
  it('says the API at its URL is unreachable and how to fix that, not "fetch failed", and exits 8', async () => {
    // A port nothing listens on: bound, then closed.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    for (const argv of [
      ['status', 'ann'],
      ['watch', 'ann'],
    ]) {
      const { code, stderr } = await runCapturing([...argv, '--url', url, '--key', 'k']);
      expect(stderr).toBe(
        `unreachable: the API at ${url} is unreachable: is ./scripts/up.sh running? ` +
          'If the API is elsewhere, pass --url or set CQ_API_URL\n',
      );
      expect(code).toBe(exitCodes.unavailable);
    }
  });
});

describe('cq on a usage mistake', () => {
  it.each([
    [['frobnicate', 'x'], 'cq: unknown command "frobnicate"; run cq --help\n'],
    [['status', 'ann', '--frob'], 'cq: unknown option --frob; run cq --help\n'],
    [['status', 'ann', '-x'], 'cq: unknown option -x; run cq --help\n'],
    [['status', 'ann', '--url'], 'cq: --url needs a value; run cq --help\n'],
    [['status', 'ann', '--json=yes'], 'cq: --json takes no value; run cq --help\n'],
    [['status'], 'cq: status needs a user id; run cq --help\n'],
    [['ls', '--follow'], 'cq: ls does not take --follow; run cq --help\n'],
    [['logs', 'ann', '--pool', 'gpu'], 'cq: logs does not take --pool; run cq --help\n'],
  ])('cq %j prints one line naming the mistake and pointing at cq --help, and exits 2', async (argv, expected) => {
    const { code, lines, stderr } = await runCapturing([...argv, '--url', 'http://127.0.0.1:1']);
    expect(stderr).toBe(expected);
    expect(lines).toEqual([]);
    expect(code).toBe(exitCodes.usage);
  });
});
