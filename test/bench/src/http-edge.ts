// The HTTP edge as deployed: our hot paths on the built API (`node apps/api/dist/main.js`, its defaults,
// a real port on 127.0.0.1, the sweep and the metrics on) beside the limit, a minimal Fastify + ioredis
// process doing the same work (one EVALSHA of the same script per request), each its own process, the
// load generator a third, against a Redis of the section's own. Then both under `node --cpu-prof`
// during the 409 and 403 load, to say where the difference goes.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadApiConfig } from '@cq/api';
import { Coordinator } from '@cq/coordinator';
import { Redis } from 'ioredis';
import { analyseCpuProfile, type ProfileBreakdown } from './cpu-profile.js';
import type { LoadResult, LoadSpec } from './http-load.js';
import { benchRedis } from './redis.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url));
const API_KEY = 'bench-http-key-0123456789abcdef';
const CONNECTIONS = 50;

/** How an API process was run. */
export interface Variant {
  name: string;
  /** The headline: main.js as deployed. */
  headline: boolean;
}

export interface PairedRow {
  variant: string;
  headline: boolean;
  /** The pair (ours, limit) with the median ratio. */
  ours: LoadResult;
  limit: LoadResult;
  ratio: number;
  /** Every pair's ratio, in run order. */
  pairRatios: number[];
}

export interface EdgePath {
  name: string;
  target: number;
  /** The status class every answer of this path should have (ours and the limit alike). */
  expect: '2xx' | '4xx';
  rows: PairedRow[];
}

/** What the profiles found, per request served. */
export interface EdgeProfile {
  seconds: number;
  paths: string[];
  ours: { requests: number; rps: number; breakdown: ProfileBreakdown };
  limit: { requests: number; rps: number; breakdown: ProfileBreakdown };
  /** By category: CPU µs per request, ours and the limit, largest difference first. */
  perRequest: Array<{ category: string; oursUs: number; limitUs: number; differenceUs: number }>;
}

export interface HttpEdgeBench {
  /** The API's log level as deployed (its default). */
  logLevel: string;
  bare: LoadResult;
  paths: EdgePath[];
  profile: EdgeProfile;
}

/** A free TCP port on 127.0.0.1 (the API is given a real one, as deployed). */
async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** A server process of the benchmark; its stdout is drained (the API's JSON logs go to a pipe, as under a supervisor). */
interface Server {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

function startChild(script: string, env: Record<string, string>, nodeArgs: string[]): ChildProcess {
  const child = spawn(process.execPath, [...nodeArgs, script], {
    // The bench's Redis keeps nothing on disk (a throwaway): accepted, as the API refuses it otherwise.
    env: { PATH: process.env['PATH'] ?? '', REDIS_ACCEPT_RISKS: 'no-persistence', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

function stopper(child: ChildProcess): () => Promise<void> {
  return async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  };
}

/** `node [nodeArgs] apps/api/dist/main.js` with the environment's defaults and `env`; ready once /healthz answers. */
async function startMainJs(redisUrl: string, env: Record<string, string>, nodeArgs: string[] = []): Promise<Server> {
  const port = await freePort();
  const child = startChild(
    `${ROOT}apps/api/dist/main.js`,
    { REDIS_URL: redisUrl, API_KEYS: API_KEY, PORT: String(port), ...env },
    nodeArgs,
  );
  child.stdout!.resume();
  const url = `http://127.0.0.1:${port}`;
  for (let tries = 0; ; tries++) {
    if (child.exitCode !== null) throw new Error(`main.js exited (${child.exitCode}) before listening`);
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (tries > 300) throw new Error('main.js did not answer /healthz within 15 s');
    await sleep(50);
  }
  // Listening comes before `onReady`'s sweeper start only by a tick; give the process its first sweep.
  await sleep(200);
  return { url, child, stop: stopper(child) };
}

/** A benchmark server script that prints one JSON line {"url"} once it listens. */
async function startScript(script: string, redisUrl: string, nodeArgs: string[] = []): Promise<Server> {
  const child = startChild(here(script), { REDIS_URL: redisUrl, API_KEYS: API_KEY }, nodeArgs);
  const lines = createInterface({ input: child.stdout! });
  const [line] = (await Promise.race([
    once(lines, 'line'),
    once(child, 'exit').then(() => {
      throw new Error(`${script} exited before listening`);
    }),
  ])) as [string];
  return { url: (JSON.parse(line) as { url: string }).url, child, stop: stopper(child) };
}

/** One run of the load generator, in a process of its own. */
export async function load(spec: LoadSpec): Promise<LoadResult> {
  const child = spawn(process.execPath, [here('./http-load.js'), JSON.stringify(spec)], {
    env: { PATH: process.env['PATH'] ?? '' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.add(child);
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  children.delete(child);
  if (code !== 0) throw new Error(`the load generator exited ${code}`);
  return JSON.parse(text) as LoadResult;
}

/** A path: its name, target, and how to load it at a base URL (our route, or the limit's). */
interface PathSpec {
  name: string;
  short: string;
  target: number;
  expect: '2xx' | '4xx';
  /** A fresh request spec (set up just before the run: a throttle or a pending session lasts seconds). */
  spec(base: string, ours: boolean, seconds: number): Promise<LoadSpec>;
}

/**
 * Runs the section. `runs` pairs per path and variant (limit, ours, limit, ours, ... after a warm-up of
 * each), `seconds` each; the profile loads each process `profileSeconds` per path.
 */
export async function benchHttpEdge(options: {
  runs: number;
  seconds: number;
  profileSeconds: number;
  /** A smoke run (CI): the headline variant only, without warm-ups. */
  quick?: boolean;
}): Promise<HttpEdgeBench> {
  const { runs, seconds, profileSeconds, quick = false } = options;
  const config = loadApiConfig({ API_KEYS: API_KEY });
  const redisServer = await benchRedis();
  const redis = new Redis(redisServer.url);
  const coordinator = new Coordinator({ redis, keyPrefix: config.keyPrefix, policy: config.policy });
  let users = 0;
  const spec = (url: string, body: string, extra: Partial<LoadSpec> = {}, runSeconds = seconds): LoadSpec => ({
    url,
    body,
    headers: {},
    randomUser: false,
    connections: CONNECTIONS,
    seconds: runSeconds,
    ...extra,
  });
  const invalidToken = JSON.stringify({
    token: `v1.${Buffer.from('bench-user').toString('base64url')}.${'A'.repeat(43)}`,
  });
  const issue = async (userId: string): Promise<string> => {
    const issued = await coordinator.tokens.issue(userId);
    if (issued.outcome !== 'issued') throw new Error(`could not issue a token for ${userId}`);
    return issued.token;
  };
  const paths: PathSpec[] = [
    {
      name: 'POST /v1/spawn, invalid token (403)',
      short: '403',
      target: 0.8,
      expect: '4xx',
      spec: async (base, ours, s) => spec(`${base}${ours ? '/v1/spawn' : '/minimal/spawn'}`, invalidToken, {}, s),
    },
    {
      // With the defaults (SPAWN_INTERVAL_MS=10000, SPAWN_BURST=1) a user's throttle stays closed 10 s
      // after an admission: each run gets a user admitted and stopped just before it.
      name: 'POST /v1/spawn, throttled (429)',
      short: '429',
      target: 0.8,
      expect: '4xx',
      spec: async (base, ours, s) => {
        const userId = `throttled-${users++}`;
        const first = await issue(userId);
        const second = await issue(userId);
        await coordinator.sessions.admit(first);
        await coordinator.sessions.requestStop(userId);
        return spec(`${base}${ours ? '/v1/spawn' : '/minimal/spawn'}`, JSON.stringify({ token: second }), {}, s);
      },
    },
    {
      // A pending session lasts PENDING_TIMEOUT_MS (60 s by default) before the sweep ends it: a fresh one per run.
      name: 'POST /v1/spawn, live session (409)',
      short: '409',
      target: 0.8,
      expect: '4xx',
      spec: async (base, ours, s) => {
        const userId = `live-${users++}`;
        const first = await issue(userId);
        const second = await issue(userId);
        await coordinator.sessions.admit(first);
        return spec(`${base}${ours ? '/v1/spawn' : '/minimal/spawn'}`, JSON.stringify({ token: second }), {}, s);
      },
    },
    {
      name: 'POST /v1/tokens (201)',
      short: 'tokens',
      target: 0.8,
      expect: '2xx',
      spec: async (base, ours, s) =>
        spec(
          `${base}${ours ? '/v1/tokens' : '/minimal/tokens'}`,
          '',
          { headers: { authorization: `Bearer ${API_KEY}` }, randomUser: true },
          s,
        ),
    },
  ];
  const variants: Array<Variant & { start(): Promise<Server> }> = [
    {
      name: `main.js as deployed (defaults: LOG_LEVEL=${config.logLevel}, sweep and metrics on)`,
      headline: true,
      start: () => startMainJs(redisServer.url, {}),
    },
    {
      name: 'main.js, defaults but LOG_LEVEL=warn (no request log lines)',
      headline: false,
      start: () => startMainJs(redisServer.url, { LOG_LEVEL: 'warn' }),
    },
    {
      name: 'in-process buildApp, sweep and default metrics off, silent logger (what this section measured before)',
      headline: false,
      start: () => startScript('./in-process-api.js', redisServer.url),
    },
  ];

  const minimal = await startScript('./minimal-routes.js', redisServer.url);
  const result: HttpEdgeBench = {
    logLevel: config.logLevel,
    bare: undefined as unknown as LoadResult,
    paths: paths.map((p) => ({ name: p.name, target: p.target, expect: p.expect, rows: [] })),
    profile: undefined as unknown as EdgeProfile,
  };
  try {
    const bareRuns: LoadResult[] = [];
    for (let i = 0; i < runs; i++)
      bareRuns.push(await load(spec(`${minimal.url}/bare`, JSON.stringify({ token: 'x' }))));
    result.bare = bareRuns.sort((a, b) => a.rps - b.rps)[Math.floor(bareRuns.length / 2)]!;

    for (const variant of quick ? variants.filter((v) => v.headline) : variants) {
      // Each variant on an empty Redis (the tokens path leaves a key per token), alone with the limit.
      await redis.flushall();
      const server = await variant.start();
      try {
        for (const [i, path] of paths.entries()) {
          if (!quick) {
            await load(await path.spec(minimal.url, false, 1));
            await load(await path.spec(server.url, true, 1));
          }
          const pairs: Array<{ ours: LoadResult; limit: LoadResult }> = [];
          for (let run = 0; run < runs; run++) {
            const limit = await load(await path.spec(minimal.url, false, seconds));
            const ours = await load(await path.spec(server.url, true, seconds));
            pairs.push({ ours, limit });
          }
          const byRatio = [...pairs].sort((a, b) => a.ours.rps / a.limit.rps - b.ours.rps / b.limit.rps);
          const { ours, limit } = byRatio[Math.floor(byRatio.length / 2)]!;
          result.paths[i]!.rows.push({
            variant: variant.name,
            headline: variant.headline,
            ours,
            limit,
            ratio: ours.rps / limit.rps,
            pairRatios: pairs.map((p) => p.ours.rps / p.limit.rps),
          });
        }
      } finally {
        await server.stop();
      }
    }

    // The profiles: main.js as deployed and the limit, each under --cpu-prof, loaded in turn on 409 then 403.
    await redis.flushall();
    const profiled = paths.filter((p) => p.short === '409' || p.short === '403');
    const dirs = {
      ours: mkdtempSync(join(tmpdir(), 'cq-prof-api-')),
      limit: mkdtempSync(join(tmpdir(), 'cq-prof-min-')),
    };
    try {
      const prof = (dir: string): string[] => ['--cpu-prof', `--cpu-prof-dir=${dir}`];
      const oursServer = await startMainJs(redisServer.url, {}, prof(dirs.ours));
      const limitServer = await startScript('./minimal-routes.js', redisServer.url, prof(dirs.limit));
      const loaded = async (base: string, ours: boolean): Promise<LoadResult[]> => {
        const results: LoadResult[] = [];
        for (const path of profiled) results.push(await load(await path.spec(base, ours, profileSeconds)));
        return results;
      };
      await load(await profiled[0]!.spec(oursServer.url, true, 1));
      await load(await profiled[0]!.spec(limitServer.url, false, 1));
      const oursRuns = await loaded(oursServer.url, true);
      const limitRuns = await loaded(limitServer.url, false);
      await Promise.all([oursServer.stop(), limitServer.stop()]);
      const summarise = (dir: string, loads: LoadResult[]) => {
        const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
        if (file === undefined) throw new Error(`no CPU profile written in ${dir}`);
        const breakdown = analyseCpuProfile(join(dir, file), {
          from: BigInt(loads[0]!.startedNs),
          to: BigInt(loads.at(-1)!.endedNs),
        });
        const requests = loads.reduce((n, r) => n + r.requests, 0);
        return { requests, rps: loads.reduce((n, r) => n + r.rps, 0) / loads.length, breakdown };
      };
      const ours = summarise(dirs.ours, oursRuns);
      const limit = summarise(dirs.limit, limitRuns);
      const usOf = (side: typeof ours, category: string): number =>
        ((side.breakdown.categories.find((c) => c.category === category)?.ms ?? 0) * 1000) / side.requests;
      const categories = new Set([...ours.breakdown.categories, ...limit.breakdown.categories].map((c) => c.category));
      result.profile = {
        seconds: profileSeconds,
        paths: profiled.map((p) => p.name),
        ours,
        limit,
        perRequest: [...categories]
          .map((category) => {
            const oursUs = usOf(ours, category);
            const limitUs = usOf(limit, category);
            return { category, oursUs, limitUs, differenceUs: oursUs - limitUs };
          })
          .sort((a, b) => b.differenceUs - a.differenceUs),
      };
    } finally {
      for (const dir of Object.values(dirs)) rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    await minimal.stop();
    redis.disconnect();
    await redisServer.stop();
  }
  return result;
}
