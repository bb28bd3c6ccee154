// CPU times and process trees read from /proc, for the benchmarks that say where the time goes.
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

/** A clock tick of /proc's CPU times, ms. */
export const TICK_MS = 1000 / (Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim()) || 100);

/** CPU time of `pid`, ms: its own (user + system) and that of its children it waited for (and theirs). */
export function cpuOf(pid: number): { self: number; children: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  // utime, stime, cutime, cstime: fields 14–17 of proc(5), counted here from the state (field 3).
  return { self: (f[11]! + f[12]!) * TICK_MS, children: (f[13]! + f[14]!) * TICK_MS };
}

/** pid → [parent pid, name], for every process of the machine. */
export function processTable(): Map<number, [number, string]> {
  const table = new Map<number, [number, string]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const name = stat.slice(stat.indexOf('(') + 1, close);
      const ppid = Number(stat.slice(close + 2).split(' ')[1]);
      table.set(Number(entry), [ppid, name]);
    } catch {
      // gone meanwhile
    }
  }
  return table;
}

export function descendants(root: number): Array<{ pid: number; name: string }> {
  const table = processTable();
  const found: Array<{ pid: number; name: string }> = [];
  const parents = new Set([root]);
  // Parents before children is not guaranteed by pid order (pids wrap): repeat until nothing is added.
  for (let added = true; added;) {
    added = false;
    for (const [pid, [ppid, name]] of table)
      if (parents.has(ppid) && !parents.has(pid)) {
        parents.add(pid);
        found.push({ pid, name });
        added = true;
      }
  }
  return found;
}
