import { createServer, type Server } from 'node:http';
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

/** An error answer whose message tries the attacks on stderr. */
const hostileError = { code: 'internal', message: `failed ${hostileRaw}` };

/** Server-sent events as the API writes them: `event`, `data` (JSON) and a blank line each. */
function sse(messages: ReadonlyArray<{ event: string; data: unknown }>): string {
  return messages.map(({ event, data }) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join('');
}

/** The printed text holds no character a terminal acts on (lines are split at the newlines between them). */
function expectInert(lines: readonly string[]): void {
  for (const line of lines) expect(line).not.toMatch(TERMINAL_CONTROL);
}

describe('cq against an API', () => {
  let server: Server;
  let url: string;

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.headers.authorization !== 'Bearer k') {
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
        // Two pages, the second after the first's last line.
        '/v1/users/mal/sessions/s-mal/logs': { lines: malLines.slice(0, 4), droppedBytes: 0, more: true },
        '/v1/users/mal/sessions/s-mal/logs?after=1-3': { lines: malLines.slice(4), droppedBytes: 0, more: false },
      };
      const body = bodies[req.url ?? ''];
      // Anything else (ann's live session, for one) is a 404, as the API answers for a user without one.
      const status = body === undefined ? 404 : 200;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body ?? { error: { code: 'no_session', message: `nothing at ${req.url}` } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

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

  it("hosts prints each host's pool and containment in columns of their own", async () => {
    const { code, lines } = await run('hosts');
    expect(code).toBe(exitCodes.ok);
    const [header, ns, pg] = lines.map((line) => line.split(/\s{2,}/));
    expect(header).toEqual(['HOST', 'POOL', 'STATE', 'BUSY', 'SLOTS', 'CONTAINMENT', 'HEARTBEAT', 'UP SINCE']);
    const column = header!.indexOf('CONTAINMENT');
    expect([ns![0], ns![1], ns![column]]).toEqual(['host-ns', 'default', 'namespace']);
    expect([pg![0], pg![1], pg![column]]).toEqual(['host-pg', 'gpu', 'group']);
    expect(lines.at(-1)).toBe('free slots: 3');
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
    expect(lines[0]).toMatch(/^rey {2}rey: running \(ready\).*pool gpu {2}job=x$/);
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
  ])('cq %j prints one line naming the mistake and pointing at cq --help, and exits 2', async (argv, expected) => {
    const { code, lines, stderr } = await runCapturing([...argv, '--url', 'http://127.0.0.1:1']);
    expect(stderr).toBe(expected);
    expect(lines).toEqual([]);
    expect(code).toBe(exitCodes.usage);
  });
});
