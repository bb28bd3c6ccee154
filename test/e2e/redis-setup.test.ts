import { startRedisServer, type RedisServer } from '@cq/test-harness';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT, startApi, startNode, startWorker, until, type Started } from '../support/processes.js';

const API_KEY = 'redis-setup-test-key-0123456789';

async function redisWith(args: string[]): Promise<RedisServer> {
  const server = await startRedisServer({ args });
  onTestFinished(() => server.stop());
  return server;
}

function urlOf(server: RedisServer, credentials?: string): string {
  return credentials === undefined ? server.url : server.url.replace('redis://', `redis://${credentials}@`);
}

/** The API's or a worker host's environment on `url`, with no risk accepted (the test harness's default cleared). */
function envFor(process: 'api' | 'worker', url: string, extra: Record<string, string> = {}): Record<string, string> {
  const common = { REDIS_URL: url, REDIS_ACCEPT_RISKS: '', LOG_LEVEL: 'info', ...extra };
  return process === 'api'
    ? { ...common, API_KEYS: API_KEY, HOST: '127.0.0.1', PORT: '0' }
    : { ...common, WORKER_ID: 'setup-check-host', SESSION_CONTAINMENT: 'group', SESSION_NETWORK: 'host' };
}

const MAIN = { api: `${ROOT}apps/api/dist/main.js`, worker: `${ROOT}apps/worker/dist/main.js` };

/** Starts the process, which must exit 1; answers its stderr's lines. */
async function refused(process: 'api' | 'worker', url: string): Promise<string[]> {
  const started = startNode(MAIN[process], envFor(process, url));
  const { code } = await started.exited();
  expect(code, `${process} exit code; stderr: ${started.stderr.join('')}`).toBe(1);
  expect(
    started.logs.some((l) => l['msg'] === 'worker host started' || String(l['msg']).startsWith('Server listening')),
  ).toBe(false);
  return started.stderr
    .join('')
    .split('\n')
    .filter((l) => l !== '');
}

/**
 * What the libraries print to stderr themselves, before our line: ioredis when INFO is refused to its
 * ready check (it goes on without it), BullMQ when it reads an eviction policy other than noeviction.
 */
const LIBRARY_NOTICE = /^Skipping the ready check because INFO command fails|^IMPORTANT! Eviction policy is/;

describe('a Redis that would lose writes stops the API and the worker hosts at start, with one line naming the fix', () => {
  const cases: Array<{ name: string; args: string[]; credentials?: string; line: RegExp }> = [
    {
      name: 'no persistence (no AOF, no save points)',
      args: [],
      line: /^Redis 7\.\d+\.\d+ at 127\.0\.0\.1:\d+ keeps nothing on disk \(appendonly no, no save points\): a restart of Redis loses every session, token and fence; set appendonly yes \(docs\/redis-setup\.md\) \(to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=no-persistence\)$/,
    },
    {
      name: 'eviction',
      args: ['--appendonly', 'yes', '--maxmemory-policy', 'allkeys-lru'],
      line: /^Redis 7\.\d+\.\d+ at 127\.0\.0\.1:\d+ evicts keys under memory pressure \(maxmemory-policy allkeys-lru\): a lease, a token or a fence counter could vanish; set maxmemory-policy noeviction \(to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=eviction\)$/,
    },
    {
      name: 'AOF with `user default off` on Redis 7.0 to 8.4.3 (redis/redis#14541)',
      args: ['--appendonly', 'yes', '--user', 'default', 'off', '--user', 'cq', 'on', '>pw', '~*', '&*', '+@all'],
      credentials: 'cq:pw',
      line: /^Redis 7\.\d+\.\d+ at 127\.0\.0\.1:\d+ replays its append-only file as the default user, which may not run set, incr, .*, xadd, xtrim, xdel \(redis\/redis#14541, fixed in Redis 8\.4\.4 and 8\.6\.0\): every script's writes would be lost at the next restart; give the default user every permission back .*\(to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=aof-acl-replay\)$/,
    },
    {
      name: 'a user without @dangerous (the scripts call INFO and LASTSAVE)',
      args: [
        '--appendonly',
        'yes',
        '--user',
        'default',
        'off',
        '~*',
        '&*',
        '+@all',
        '--user',
        'cq',
        'on',
        '>pw',
        '~*',
        '&*',
        '+@all',
        '-@dangerous',
      ],
      credentials: 'cq:pw',
      // INFO refused: the version, eviction, persistence and the replay are not known either.
      line: /^Redis \(version unknown\) at 127\.0\.0\.1:\d+: user "cq" may not run info, lastsave, which the scripts and processes need: give it the ACL in docs\/redis-setup\.md; also: .*its eviction policy is not known without INFO; .*\(to start anyway, knowing what it costs: REDIS_ACCEPT_RISKS=acl-commands,eviction,no-persistence,aof-acl-replay\)$/,
    },
    {
      name: 'a wrong password',
      args: ['--appendonly', 'yes', '--requirepass', 'the-right-password'],
      credentials: ':a-wrong-password',
      line: /^REDIS_URL: Redis at 127\.0\.0\.1:\d+ refused the user name or password \(WRONGPASS invalid username-password pair or user is disabled\.\): set the user and password of an ACL user that is on, redis:\/\/<user>:<password>@<host>:<port>$/,
    },
  ];

  it.each(cases)('$name', async ({ args, credentials, line }) => {
    const server = await redisWith(args);
    const url = urlOf(server, credentials);
    for (const process of ['api', 'worker'] as const) {
      const lines = await refused(process, url);
      // One line of ours, the libraries' own notices aside: ioredis may print one of another connection's
      // ready check while the process is exiting, after ours (CI saw it once, under load).
      const ours = lines.filter((l) => !LIBRARY_NOTICE.test(l));
      expect(ours, `${process}: ${lines.join('\n')}`).toHaveLength(1);
      expect(ours[0], `${process}: ${lines.join('\n')}`).toMatch(line);
      expect(lines.join('\n')).not.toContain('a-wrong-password');
    }
  });
});

describe('REDIS_ACCEPT_RISKS', () => {
  it('lets the processes start on what it names, warning of it at every start', async () => {
    const server = await redisWith(['--appendonly', 'yes', '--maxmemory-policy', 'volatile-lru']);
    const env = { REDIS_ACCEPT_RISKS: 'eviction' };
    const api = await startApi(envFor('api', server.url, env));
    onTestFinished(async () => void (await api.stop()));
    const worker = await startWorker(envFor('worker', server.url, env));
    onTestFinished(async () => void (await worker.stop()));
    for (const started of [api, worker]) {
      const warnings = started.logs.filter((l) => l['level'] === 40).map((l) => String(l['msg']));
      expect(warnings).toContain(
        'REDIS_ACCEPT_RISKS=eviction: Redis set up to lose writes in these ways does not stop this process',
      );
      expect(
        warnings.some((w) => /^accepted by REDIS_ACCEPT_RISKS=eviction: .*maxmemory-policy volatile-lru/.test(w)),
      ).toBe(true);
    }
    expect((await fetch(`${api.baseUrl}/readyz`)).status).toBe(200);
  });
});

describe('after a reconnect', () => {
  it('a Redis now set up to lose writes is logged as an error by both, and the API is not ready until it is fixed; neither exits', async () => {
    const server = await redisWith(['--appendonly', 'yes']);
    const api = await startApi(envFor('api', server.url));
    onTestFinished(async () => void (await api.stop()));
    const worker = await startWorker(envFor('worker', server.url));
    onTestFinished(async () => void (await worker.stop()));
    expect((await fetch(`${api.baseUrl}/readyz`)).status).toBe(200);

    const admin = new Redis(server.url);
    onTestFinished(() => admin.disconnect());
    const reconnectAll = (): Promise<unknown> => admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    // Made a cache behind their backs, then every connection dropped: each process reconnects.
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    await reconnectAll();
    const problem = /evicts keys under memory pressure \(maxmemory-policy allkeys-lru\)/;
    const errorLine = (p: Started) => p.waitForLog((l) => l['level'] === 50 && problem.test(String(l['msg'])), 10_000);
    await Promise.all([errorLine(api), errorLine(worker)]);
    let readyz: Response | undefined;
    await until(
      async () => (readyz = await fetch(`${api.baseUrl}/readyz`)).status === 503,
      10_000,
      '/readyz 503 with the problem',
    );
    const body = (await readyz!.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('unavailable');
    expect(body.error.message).toMatch(problem);

    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await reconnectAll();
    await until(async () => (await fetch(`${api.baseUrl}/readyz`)).status === 200, 10_000, '/readyz 200 again');
    await worker.waitForLog((l) => l['msg'] === 'Redis setup checked again: the problem is gone', 10_000);
    expect(api.child.exitCode).toBeNull();
    expect(worker.child.exitCode).toBeNull();
  });
});
