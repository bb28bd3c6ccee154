#!/usr/bin/env node
// Runs egress sessions the way a worker host does (the built probe and launcher), for the egress test,
// which starts this program inside a network namespace of its own making (`ip netns exec`): there the
// "internet" is a namespace of the test's with a documentation address, never a real one.
//   node egress-host.mjs <config JSON>
// config: {command, sessionsDir, sessions: [{userId, user?, metadata}]}. Serves 127.0.0.1:9090 and
// <its own address>:9090 (the host's services), runs each session until SIGTERM, then stops them and
// prints one JSON line per session end: {userId, exit}.
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import pino from 'pino';
import { RuntimeLauncher, probeContainment } from '../../apps/worker/dist/index.js';

const config = JSON.parse(process.argv[2]);
const logger = pino({ level: 'warn' }, pino.destination(2));
const own = Object.values(networkInterfaces())
  .flat()
  .filter((a) => a.family === 'IPv4' && !a.internal)
  .map((a) => a.address);
for (const address of ['127.0.0.1', ...own])
  createServer((socket) => socket.end(`host service on ${address}\n`)).listen(9090, address);

const handles = [];
for (const session of config.sessions) {
  const { plan } = probeContainment({
    containment: 'namespace',
    memoryMb: undefined,
    pidsMax: undefined,
    user: session.user,
    network: 'egress',
    tmpMb: 16,
    sessionsDir: config.sessionsDir,
  });
  const launcher = new RuntimeLauncher({ command: config.command, logger, containment: plan });
  await launcher.open();
  const handle = launcher.launch({
    sessionEnv: {
      SESSION_ID: `egress-${session.userId}`,
      USER_ID: session.userId,
      FENCE: '1',
      DEADLINE: String(Date.now() + 600_000),
      SESSION_METADATA: JSON.stringify(session.metadata),
    },
    graceMs: 500,
    deadlineAt: performance.now() + 600_000,
    holdsUntil: performance.now() + 600_000,
    onOutput: (stream, lines) => {
      for (const line of lines) process.stderr.write(`[${session.userId} ${stream}] ${line}\n`);
    },
  });
  handles.push({ session, handle, launcher });
}
process.stdout.write('started\n');
process.on('SIGTERM', async () => {
  for (const { session, handle, launcher } of handles) {
    handle.terminate();
    const exit = await handle.exited;
    await launcher.close();
    process.stdout.write(`${JSON.stringify({ userId: session.userId, exit })}\n`);
  }
  process.exit(0);
});
