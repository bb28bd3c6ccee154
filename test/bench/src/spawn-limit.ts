// Child process of the sessions benchmark: the limit of a session start, Node's child_process.spawn of
// the session's command, from a Node process of its own (as the worker's session runtime is). Reads one
// JSON line per round on stdin, {"users": [...]}, spawns `/bin/sh -c LIMIT_COMMAND` once per user (each
// with USER_ID, in a process group of its own), and once all have exited answers {"t0": <epoch ms>,
// "exited": [<ms from t0 to each one's exit>]}, t0 the moment just before the first spawn. The command
// writes "<user> <epoch ns>" where the benchmark reads it. A round may name `wrap`, an argv put before
// `/bin/sh -c` (`unshare --pid --fork`, `bwrap ...`), or `argv`, what to spawn instead of the command
// (`bwrap ... true`: its exit is then all there is to see). The answer also says the CPU time the
// round's processes used, all of them (`cpuTicks`: the children's user and system time of
// /proc/self/stat, which holds every descendant waited for, in clock ticks).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const command = process.env['LIMIT_COMMAND']!;
const nowMs = (): number => performance.timeOrigin + performance.now();
const childTicks = (): number => {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // cutime and cstime: fields 16 and 17 of proc(5), counted from the state (field 3) here.
  return Number(fields[13]) + Number(fields[14]);
};

for await (const line of createInterface({ input: process.stdin })) {
  const { users, wrap, argv } = JSON.parse(line) as { users: string[]; wrap?: string[]; argv?: string[] };
  const what = argv ?? [...(wrap ?? []), '/bin/sh', '-c', command];
  const ticks = childTicks();
  const t0 = nowMs();
  const exited = await Promise.all(
    users.map(
      (userId) =>
        new Promise<number>((resolve, reject) =>
          spawn(what[0]!, what.slice(1), {
            env: { PATH: process.env['PATH'] ?? '', USER_ID: userId },
            stdio: 'ignore',
            detached: true,
          })
            .once('exit', (code) =>
              code === 0 ? resolve(nowMs() - t0) : reject(new Error(`${what.join(' ')}: exit ${code}`)),
            )
            .once('error', reject),
        ),
    ),
  );
  process.stdout.write(`${JSON.stringify({ t0, exited, cpuTicks: childTicks() - ticks })}\n`);
}
