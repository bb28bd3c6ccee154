// The built-in demo session (see the contract): reads SESSION_METADATA, runs for `durationMs`
// milliseconds (forever when absent) printing a line a second, then exits with `exitCode` (default 0).
import { z } from 'zod';

const metadataSchema = z.object({ durationMs: z.number().int().nonnegative().optional(), exitCode: z.number().int().min(0).max(255).optional() });

let metadata: z.infer<typeof metadataSchema> = {};
try {
  const parsed = metadataSchema.safeParse(JSON.parse(process.env['SESSION_METADATA'] ?? '{}'));
  if (parsed.success) metadata = parsed.data;
  else process.stderr.write(`demo session: ignoring SESSION_METADATA: ${parsed.error.issues[0]?.message}\n`);
} catch {
  process.stderr.write('demo session: SESSION_METADATA is not JSON; running with defaults\n');
}

const started = Date.now();
const session = `${process.env['USER_ID'] ?? '?'} session ${process.env['SESSION_ID'] ?? '?'} fence ${process.env['FENCE'] ?? '?'}`;
process.stdout.write(`demo: ${session} started; ${metadata.durationMs === undefined ? 'runs until stopped' : `runs ${metadata.durationMs} ms`}\n`);
process.on('SIGTERM', () => {
  process.stdout.write(`demo: ${session} stopping on SIGTERM\n`);
  process.exit(143);
});
const tick = setInterval(() => {
  process.stdout.write(`demo: ${session} alive for ${Math.round((Date.now() - started) / 1000)} s\n`);
}, 1000);
if (metadata.durationMs !== undefined) {
  setTimeout(() => {
    clearInterval(tick);
    process.stdout.write(`demo: ${session} done\n`);
    process.exit(metadata.exitCode ?? 0);
  }, metadata.durationMs);
}
