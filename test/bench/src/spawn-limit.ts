// Child process of the sessions benchmark: the limit of a session start, Node's child_process.spawn of
// the session's command, from a Node process of its own (as the worker's session runtime is). Reads one
// JSON line per round on stdin, {"users": [...]}, spawns `/bin/sh -c LIMIT_COMMAND` once per user (each
// with USER_ID, in a process group of its own), and once all have exited answers {"t0": <epoch ms>}, the
// moment just before the first spawn. The command writes "<user> <epoch ns>" where the benchmark reads it.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const command = process.env['LIMIT_COMMAND']!;
const nowMs = (): number => performance.timeOrigin + performance.now();

for await (const line of createInterface({ input: process.stdin })) {
  const { users } = JSON.parse(line) as { users: string[] };
  const t0 = nowMs();
  await Promise.all(
    users.map(
      (userId) =>
        new Promise((resolve) =>
          spawn('/bin/sh', ['-c', command], {
            env: { PATH: process.env['PATH'] ?? '', USER_ID: userId },
            stdio: 'ignore',
            detached: true,
          }).once('exit', resolve),
        ),
    ),
  );
  process.stdout.write(`${JSON.stringify({ t0 })}\n`);
}
