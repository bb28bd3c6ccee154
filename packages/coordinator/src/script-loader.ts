import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Every script the coordinator runs; each is `lua/<name>-<numberOfKeys>.lua`. */
export const scriptNames = [
  'acquireLease',
  'admit',
  'appendOutput',
  'cancelAdmission',
  'claimSession',
  'consumeToken',
  'createWebhook',
  'drainWorker',
  'dropDirectory',
  'enterDirectory',
  'finishSession',
  'forgetHost',
  'fixedWindow',
  'gcra',
  'heartbeatWorker',
  'issueToken',
  'markReady',
  'moveWebhookCursor',
  'probeSlot',
  'publishEventMark',
  'readCapacity',
  'recordActivity',
  'releaseLease',
  'releaseSlots',
  'nudgeHost',
  'recountCapacity',
  'renewLease',
  'renewSession',
  'requestStop',
  'reserveSlot',
  'readSession',
  'recordDelivery',
  'readOutput',
  'slidingWindow',
  'sweepHosts',
  'sweepSession',
  'renewSweepTurn',
  'unlistSlot',
  'updateSession',
] as const;

/** Name of a coordinator script. */
export type ScriptName = (typeof scriptNames)[number];

/** One script, with its includes expanded. */
export interface ScriptSource {
  readonly name: string;
  readonly numberOfKeys: number;
  readonly file: string;
  readonly lua: string;
}

/** The folder holding the scripts: `lua/` at the repository root (the same from `src/` and `dist/`). */
export const defaultScriptsDir = fileURLToPath(new URL('../../../lua/', import.meta.url));

const FILE_NAME = /^([a-z][A-Za-z0-9]*)-(\d+)\.lua$/;
const INCLUDE = /^--- @include "([^"]+)"\s*$/;

function expand(file: string, seen: Set<string>): string {
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => {
      const match = INCLUDE.exec(line);
      if (match === null) return line;
      const included = resolve(dirname(file), `${match[1]}.lua`);
      if (seen.has(included)) return `-- (already included: ${match[1]})`;
      seen.add(included);
      return expand(included, seen);
    })
    .join('\n');
}

/** Reads every script of `dir`, expanding `--- @include "path"` lines once per script. */
export function loadScripts(dir: string = defaultScriptsDir): Map<string, ScriptSource> {
  let files: string[];
  try {
    files = readdirSync(dir);
  } catch (cause) {
    throw new Error(`Lua scripts not found in ${dir}: pass scriptsDir pointing to the repository's lua/ folder`, {
      cause,
    });
  }
  const scripts = new Map<string, ScriptSource>();
  for (const name of files) {
    const match = FILE_NAME.exec(name);
    if (match === null) continue;
    const file = join(dir, name);
    scripts.set(match[1]!, {
      name: match[1]!,
      numberOfKeys: Number(match[2]),
      file,
      lua: expand(file, new Set([file])),
    });
  }
  const missing = scriptNames.filter((name) => !scripts.has(name));
  if (missing.length > 0) throw new Error(`Lua scripts missing from ${dir}: ${missing.join(', ')}`);
  return scripts;
}
