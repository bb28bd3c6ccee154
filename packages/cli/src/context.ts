import { CoordinatorClient } from '@cq/client';
import type { Options } from './args.js';

/** What every command works with: the API client, the output mode and where lines go. */
export interface Context {
  client: CoordinatorClient;
  json: boolean;
  out: (line: string) => void;
}

/** The context for the command line's options: `--url`/`$CQ_API_URL`, `--key`/`$CQ_API_KEY`, `--json`. */
export function contextOf(options: Options, out: (line: string) => void): Context {
  const baseUrl = options.url ?? process.env['CQ_API_URL'] ?? 'http://127.0.0.1:3000';
  const apiKey = options.key ?? process.env['CQ_API_KEY'];
  return {
    client: new CoordinatorClient({ baseUrl, ...(apiKey === undefined ? {} : { apiKey }) }),
    json: options.json,
    out,
  };
}

/** Prints `value` as JSON with `--json`, else `text`. */
export function print(ctx: Context, value: unknown, text: string): void {
  ctx.out(ctx.json ? JSON.stringify(value) : text);
}
