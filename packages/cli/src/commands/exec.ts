// Work inside a session from the command line: `exec` runs a command in the user's live session (with
// -i its stdin is ours, with -t it gets a terminal and ours goes raw, as `kubectl exec -it`), and `cp`
// copies a file in or out, streamed.
import { createReadStream, createWriteStream } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Context } from '../context.js';
import { UsageError } from '../usage-error.js';
import { command } from './command.js';

/** The id of the user's live session. */
async function sessionOf(ctx: Context, userId: string): Promise<string> {
  return (await ctx.client.getSession(userId)).sessionId;
}

/**
 * `exec <userId> [-i] [-t] -- <argv...>`: runs argv in the user's live session; exits with its status.
 * Without -i the command's stdin is closed at once (a CLI waiting on stdin would hang otherwise).
 */
export const exec = command(['interactive', 'tty'], async (ctx, { need, positionals, options }) => {
  const userId = need('a user id and the command, e.g. exec alice -- ls -l');
  const argv = positionals.slice(1);
  if (argv.length === 0) throw new UsageError('exec needs the command after the user id, e.g. exec alice -- ls -l');
  const tty = options.tty === true;
  const interactive = options.interactive === true;
  const stdin = process.stdin;
  const terminal = tty && stdin.isTTY && process.stdout.isTTY;
  const stream = await ctx.client.exec(await sessionOf(ctx, userId), {
    argv,
    tty,
    ...(terminal ? { cols: process.stdout.columns, rows: process.stdout.rows } : {}),
  });
  const onResize = (): void => stream.resize(process.stdout.columns, process.stdout.rows);
  if (terminal) {
    // Raw: every key (Ctrl-C included) goes to the command's terminal, which echoes and signals.
    stdin.setRawMode(true);
    process.stdout.on('resize', onResize);
  }
  try {
    stream.pipe(process.stdout, { end: false });
    stream.stderr.pipe(process.stderr, { end: false });
    if (interactive) stdin.pipe(stream);
    else stream.end();
    const exit = await stream.exited;
    // Its output is all written before the status is taken.
    await new Promise<void>((resolve) => process.stdout.write('', () => resolve()));
    return exit.exitCode;
  } finally {
    if (terminal) {
      stdin.setRawMode(false);
      process.stdout.removeListener('resize', onResize);
    }
    if (interactive) {
      stdin.unpipe(stream);
      stdin.pause();
    }
  }
});

/** `<userId>:<path>`, or undefined for a local path. */
function remote(spec: string): { userId: string; path: string } | undefined {
  const match = /^([^/:][^:]*):(\/.*)$/.exec(spec);
  return match === null ? undefined : { userId: match[1]!, path: match[2]! };
}

/**
 * `cp <file> <userId>:<path>` and `cp <userId>:<path> <file>`: a file into or out of the user's live
 * session, streamed (`-` is stdin or stdout). The path is absolute, as the session sees its files.
 */
export const cp = command([], async (ctx, { positionals }) => {
  const [from, to] = positionals;
  if (from === undefined || to === undefined || positionals.length > 2)
    throw new UsageError('cp needs a source and a destination, one of them <userId>:<absolute path>');
  const source = remote(from);
  const target = remote(to);
  if ((source === undefined) === (target === undefined))
    throw new UsageError('cp copies between here and a session: exactly one side is <userId>:<absolute path>');
  if (target !== undefined) {
    const body = from === '-' ? process.stdin : createReadStream(from);
    await new Promise<void>((resolve, reject) => {
      body.once('error', reject);
      body.once('readable', () => resolve());
    });
    await ctx.client.writeFile(
      await sessionOf(ctx, target.userId),
      target.path,
      Readable.toWeb(body) as ReadableStream<Uint8Array>,
    );
    return 0;
  }
  const bytes = await ctx.client.readFile(await sessionOf(ctx, source!.userId), source!.path);
  await pipeline(Readable.fromWeb(bytes as never), to === '-' ? process.stdout : createWriteStream(to));
  return 0;
});
