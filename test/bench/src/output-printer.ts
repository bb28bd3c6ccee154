// The printer of the output benchmark: a line "<seq> <epoch ms>" every PRINT_EVERY_MS (default 100),
// the time (performance.timeOrigin + performance.now(), sub-millisecond) taken just before the line
// leaves the process. To stdout (the session of the real path: its worker host carries the lines to
// Redis), or, with PRINT_CHANNEL and REDIS_URL, PUBLISHed on that channel (the bare relay's feed).
// The lines go out at fixed points of the wall clock, PRINT_PHASE_MS (default 0) past each multiple of
// the interval, so two printers on one machine can be kept from printing at the same instant.
// Runs until it is stopped.
import { setTimeout as sleep } from 'node:timers/promises';

const everyMs = Number(process.env['PRINT_EVERY_MS'] ?? 100);
const phaseMs = Number(process.env['PRINT_PHASE_MS'] ?? 0);
const channel = process.env['PRINT_CHANNEL'];
// ioredis only for the relay's feed: as a session, the printer runs from a copy outside the checkout
// (a session sees neither a checkout under /tmp nor, from its copy, the checkout's packages).
const publisher = channel === undefined ? undefined : new (await import('ioredis')).Redis(process.env['REDIS_URL']!);
if (publisher !== undefined) await publisher.ping();
const nowMs = (): number => performance.timeOrigin + performance.now();

// On a schedule, so a late line does not push the later ones back.
let due = Math.ceil((nowMs() - phaseMs) / everyMs + 1) * everyMs + phaseMs;
for (let seq = 0; ; seq++, due += everyMs) {
  const wait = due - nowMs();
  if (wait > 0) await sleep(wait);
  const line = `${seq} ${nowMs().toFixed(3)}`;
  if (publisher === undefined) process.stdout.write(`${line}\n`);
  else await publisher.publish(channel!, line);
}
