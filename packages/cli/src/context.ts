import { CoordinatorClient } from '@cq/client';
import type { Options } from './args.js';
import { printable } from './escape.js';

/** Where the CLI sends its requests, as error lines name it when the fix is on the CLI's side. */
export interface Target {
  /** The API's base URL, from `--url`, else `$CQ_API_URL`, else the default. */
  baseUrl: string;
  /** Where the service key came from; undefined when none was given. */
  keyFrom: '--key' | 'CQ_API_KEY' | undefined;
}

/** What every command works with: the API client, where it points, the output mode and where lines go. */
export interface Context {
  client: CoordinatorClient;
  target: Target;
  json: boolean;
  /** Prints a line: JSON as it is with `--json`, else text with every control but its newlines escaped ({@link printable}). */
  out: (line: string) => void;
}

/** The API's URL when neither `--url` nor `$CQ_API_URL` names one (where `./scripts/up.sh` puts it when free). */
export const DEFAULT_API_URL = 'http://127.0.0.1:3000';

/**
 * The context for the command line's options: `--url`/`$CQ_API_URL`, `--key`/`$CQ_API_KEY`, `--json`.
 * Lines go to `out`, text lines through {@link printable} so that nothing a command prints, whatever it
 * forgot to escape, can drive the terminal.
 */
export function contextOf(options: Options, out: (line: string) => void): Context {
  // An empty variable (`CQ_API_KEY=`) is as good as none.
  const baseUrl = options.url ?? (process.env['CQ_API_URL'] || DEFAULT_API_URL);
  const envKey = process.env['CQ_API_KEY'] || undefined;
  const apiKey = options.key ?? envKey;
  const keyFrom = options.key !== undefined ? '--key' : envKey !== undefined ? 'CQ_API_KEY' : undefined;
  return {
    client: new CoordinatorClient({ baseUrl, ...(apiKey === undefined ? {} : { apiKey }) }),
    target: { baseUrl, keyFrom },
    json: options.json === true,
    out: options.json ? out : (line) => out(printable(line)),
  };
}

/** Prints `value` as JSON with `--json`, else `text`. */
export function print(ctx: Context, value: unknown, text: string): void {
  ctx.out(ctx.json ? JSON.stringify(value) : text);
}
