// Reads a V8 CPU profile (`node --cpu-prof`'s .cpuprofile JSON) and says where the process's CPU went:
// each sample is charged to the innermost frame of the stack that is library or application code (a
// package under node_modules, or one of ours), so time spent in Node's internals and in V8 builtins on
// a library's behalf (pino's write(2) to stdout, JSON.stringify called by a serializer) counts as that
// library's. Samples with no such frame are Node's own (HTTP parsing, sockets), the garbage collector,
// or V8 (`(program)`). Idle samples are left out.
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  /** Microseconds, CLOCK_MONOTONIC (as `process.hrtime`). */
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Where a process's busy CPU went, by what it was doing. */
export interface ProfileBreakdown {
  /** Busy (not idle) CPU time sampled in the window, ms. */
  busyMs: number;
  /** Whether the samples were restricted to the load's window (false: the whole profile, start-up included). */
  windowed: boolean;
  /** By category, largest first: ms and share of `busyMs`. */
  categories: Array<{ category: string; ms: number; share: number }>;
  /** The functions with the most self time (not lifted), largest first. */
  topFunctions: Array<{ fn: string; where: string; ms: number; share: number }>;
}

/** Packages that make one feature, so the breakdown reads as what the API does. */
const FEATURES: Array<[string, RegExp]> = [
  [
    'pino logging (pino, its serializers, redaction, sonic-boom)',
    /^(pino|pino-std-serializers|sonic-boom|fast-redact|@pinojs\/redact|quick-format-unescaped|safe-stable-stringify|atomic-sleep|thread-stream|on-exit-leak-free|fast-safe-stringify|pino-abstract-transport|real-require)$/,
  ],
  ['prom-client (metrics)', /^(prom-client|tdigest|bintrees)$/],
  ['zod validation (zod, fastify-type-provider-zod)', /^(zod|fastify-type-provider-zod)$/],
  [
    'ioredis (commands, replies)',
    /^(ioredis|redis-parser|redis-errors|denque|cluster-key-slot|standard-as-callback|lodash\.defaults|lodash\.isarguments|debug|ms)$/,
  ],
  ['bullmq', /^(bullmq|msgpackr|cron-parser|luxon|semver|uuid|node-abort-controller)$/],
  [
    'fastify (routing, hooks, reply, JSON body)',
    /^(fastify|@fastify\/.*|find-my-way|avvio|fast-json-stringify|secure-json-parse|light-my-request|abstract-logging|fast-querystring|fast-decode-uri-component|process-warning|toad-cache|rfdc|ret|safe-regex2|proxy-addr|forwarded|ipaddr\.js|json-schema-ref-resolver|fast-uri|ajv|ajv-formats|fast-deep-equal|json-schema-traverse|require-from-string|fastq|reusify|content-type|cookie|set-cookie-parser|semver)$/,
  ],
];

const SWEEP = 'ours: the sweep (coordinator/sweeper.js and what it calls)';

/** The package a script URL belongs to (`@scope/name` or `name`), or undefined for none. */
function packageOf(url: string): string | undefined {
  const at = url.lastIndexOf('/node_modules/');
  if (at < 0) return undefined;
  const [first, second] = url.slice(at + '/node_modules/'.length).split('/');
  return first?.startsWith('@') ? `${first}/${second}` : first;
}

/** The category of library or application code a frame is in, or undefined for Node's and V8's own. */
function userland(url: string): string | undefined {
  const pkg = packageOf(url);
  if (pkg !== undefined) {
    if (pkg.startsWith('@cq/')) return `ours: ${pkg}`;
    return FEATURES.find(([, re]) => re.test(pkg))?.[0] ?? `other package: ${pkg}`;
  }
  if (/\/packages\/coordinator\/dist\/sweeper\.js$/.test(url)) return SWEEP;
  if (/\/test\/bench\/dist\//.test(url)) return "the limit's route code (test/bench minimal-routes.js)";
  const ours = /\/(apps\/[^/]+|packages\/[^/]+)\/dist\//.exec(url);
  if (ours !== null) return `ours: ${ours[1]!.replace(/^packages\//, '@cq/')}`;
  if (url.startsWith('file://') || url.startsWith('/')) return 'other script';
  return undefined;
}

/** The category of a frame with no library or application code above it. */
function nodeOwn(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') {
    if (functionName === '(garbage collector)') return 'garbage collector';
    if (functionName === '(program)') return 'V8 / native, outside any JS frame (program)';
    return 'V8 builtins';
  }
  if (/^node:(_http_|http$|internal\/http)/.test(url)) return 'node: http (parser, server, outgoing)';
  if (/^node:(net$|internal\/net|internal\/stream_base_commons|internal\/dns|dns$)/.test(url))
    return 'node: net, sockets';
  if (/^node:(stream$|internal\/streams\/)/.test(url)) return 'node: streams';
  if (/^node:(crypto$|internal\/crypto\/)/.test(url)) return 'node: crypto';
  if (/^node:(timers$|internal\/timers)/.test(url)) return 'node: timers';
  if (/^node:internal\/process\/task_queues/.test(url)) return 'node: nextTick, microtasks';
  return 'node: other';
}

/** Reads `path` and breaks its busy samples down; with `windowNs`, only those within it. */
export function analyseCpuProfile(path: string, windowNs?: { from: bigint; to: bigint }): ProfileBreakdown {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  // The category each node's samples go to, found once per node.
  const categoryOf = new Map<number, string | null>();
  const categorise = (id: number): string | null => {
    const known = categoryOf.get(id);
    if (known !== undefined) return known;
    const leaf = byId.get(id)!.callFrame;
    let category: string | null = null;
    if (leaf.functionName === '(idle)' || leaf.functionName === '(root)') category = null;
    else {
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const found = userland(byId.get(at)!.callFrame.url);
        if (found === SWEEP) {
          // Whatever the sweep calls (ioredis, the coordinator's fan-out) is the sweep's.
          category = SWEEP;
          break;
        }
        category ??= found ?? null;
      }
      category ??= nodeOwn(leaf);
    }
    categoryOf.set(id, category);
    return category;
  };
  const inWindow = (from: number, to: number): Array<[number, number]> => {
    const picked: Array<[number, number]> = [];
    let t = profile.startTime;
    for (let i = 0; i < profile.samples.length; i++) {
      t += profile.timeDeltas[i]!;
      // A sample's time is the gap to the next one (the last one gets none).
      const spent = profile.timeDeltas[i + 1] ?? 0;
      if (t >= from && t <= to) picked.push([profile.samples[i]!, spent]);
    }
    return picked;
  };
  let picked = inWindow(
    windowNs === undefined ? -Infinity : Number(windowNs.from / 1000n),
    windowNs === undefined ? Infinity : Number(windowNs.to / 1000n),
  );
  const windowed = windowNs !== undefined && picked.length > 0;
  if (picked.length === 0) picked = inWindow(-Infinity, Infinity);
  const byCategory = new Map<string, number>();
  const bySelf = new Map<string, { fn: string; where: string; us: number }>();
  let busy = 0;
  for (const [id, us] of picked) {
    const category = categorise(id);
    if (category === null) continue;
    busy += us;
    byCategory.set(category, (byCategory.get(category) ?? 0) + us);
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const where =
      url === ''
        ? ''
        : `${url.replace(/^.*\/node_modules\//, '').replace(/^file:\/\/.*?\/(apps|packages)\//, '$1/')}:${lineNumber + 1}`;
    const key = `${functionName} ${where}`;
    const entry = bySelf.get(key) ?? { fn: functionName || '(anonymous)', where, us: 0 };
    entry.us += us;
    bySelf.set(key, entry);
  }
  return {
    busyMs: busy / 1000,
    windowed,
    categories: [...byCategory]
      .map(([category, us]) => ({ category, ms: us / 1000, share: us / busy }))
      .sort((a, b) => b.ms - a.ms),
    topFunctions: [...bySelf.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, 15)
      .map((e) => ({ fn: e.fn, where: e.where, ms: e.us / 1000, share: e.us / busy })),
  };
}
