#!/usr/bin/env node
// A session for tests (SESSION_COMMAND="node test/support/session.mjs <observer file>"): an independent
// observer of what really runs. Every 50 ms it appends "userId fence timestamp pid" to the observer
// file. SESSION_METADATA: durationMs (forever when absent), exitCode (default 0), ignoreTerm (keep
// running on SIGTERM, so only SIGKILL ends it), readyAfterMs and endpoint (announce readiness on
// SESSION_NOTIFY_FD after that long, with that endpoint), activeEveryMs and activeForMs (write
// {"active": true} on SESSION_NOTIFY_FD every activeEveryMs while less than activeForMs have passed since
// it started; each write is also an observer line "userId fence timestamp pid active"), printLabels (a stdout
// line "labels <SESSION_LABELS> pool <SESSION_POOL>" after the first). Output: "output" (lines [stream, text] printed
// at start, in order, each after the previous one was written), "longLineBytes" (one stderr line of that
// many bytes after them), "tickEveryMs" (a stdout line "tick <n> <epoch ms, fractional>" that often),
// "floodBytes" (that many bytes of short stdout lines as fast as the pipe takes them; once the file
// "floodWhenFile" names exists, when given).
import { appendFileSync, existsSync, writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

const file = process.argv[2];
const metadata = JSON.parse(process.env.SESSION_METADATA ?? '{}');
const line = () => `${process.env.USER_ID} ${process.env.FENCE} ${Date.now()} ${process.pid}\n`;
const beat = () => {
  if (file) appendFileSync(file, line());
};
// The handler before the first heartbeat: a stop may arrive as soon as a test sees that beat, and until
// a handler is installed SIGTERM's default action ends the process (a session ignoring SIGTERM would not).
process.on('SIGTERM', () => {
  if (metadata.ignoreTerm) {
    process.stdout.write('ignoring SIGTERM\n');
    return;
  }
  process.exit(143);
});
beat();
setInterval(beat, 50);
process.stdout.write(`test session ${process.env.USER_ID} fence ${process.env.FENCE} pid ${process.pid}\n`);
if (metadata.printLabels)
  process.stdout.write(`labels ${process.env.SESSION_LABELS} pool ${process.env.SESSION_POOL}\n`);
if (metadata.readyAfterMs !== undefined)
  setTimeout(() => {
    const announcement = { ready: true, ...(metadata.endpoint === undefined ? {} : { endpoint: metadata.endpoint }) };
    writeSync(Number(process.env.SESSION_NOTIFY_FD), `${JSON.stringify(announcement)}\n`);
  }, metadata.readyAfterMs);
const write = (stream, text) =>
  new Promise((resolve) => (stream === 'stderr' ? process.stderr : process.stdout).write(`${text}\n`, resolve));
void (async () => {
  for (const [stream, text] of metadata.output ?? []) await write(stream, text);
  if (metadata.longLineBytes !== undefined) await write('stderr', 'y'.repeat(metadata.longLineBytes));
  if (metadata.floodWhenFile !== undefined) while (!existsSync(metadata.floodWhenFile)) await sleep(50);
  if (metadata.floodBytes !== undefined) {
    const chunk = Buffer.from('a short line of output, forty-four bytes lo\n'.repeat(1489)); // 65,516 bytes
    for (let sent = 0; sent < metadata.floodBytes; sent += chunk.length)
      if (!process.stdout.write(chunk)) await new Promise((resolve) => process.stdout.once('drain', resolve));
  }
})();
if (metadata.tickEveryMs !== undefined) {
  let tick = 0;
  setInterval(
    () => process.stdout.write(`tick ${tick++} ${performance.timeOrigin + performance.now()}\n`),
    metadata.tickEveryMs,
  );
}
if (metadata.durationMs !== undefined) setTimeout(() => process.exit(metadata.exitCode ?? 0), metadata.durationMs);
if (metadata.activeEveryMs !== undefined) {
  const since = Date.now();
  const activity = setInterval(() => {
    if (Date.now() - since > (metadata.activeForMs ?? Infinity)) {
      clearInterval(activity);
      return;
    }
    writeSync(Number(process.env.SESSION_NOTIFY_FD), '{"active": true}\n');
    if (file) appendFileSync(file, line().replace('\n', ' active\n'));
  }, metadata.activeEveryMs);
}
