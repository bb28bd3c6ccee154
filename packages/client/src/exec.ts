// A command (or a terminal) inside a session as a Node duplex stream: `GET /v1/sessions/{id}/exec`, a
// WebSocket with Kubernetes' exec framing (v5.channel.k8s.io). Loaded only when used (it needs Node's
// streams and the `ws` package; the rest of the client needs neither).
import { Duplex, PassThrough } from 'node:stream';
import WebSocket from 'ws';
import { UnavailableError, toApiError } from './errors.js';

/** What {@link ExecStream} runs. */
export interface ExecOptions {
  /** The program and its arguments (default `["/bin/sh"]`). */
  readonly argv?: readonly string[];
  /** Give it a terminal (its stdout and stderr then come as one stream, on the duplex's readable side). */
  readonly tty?: boolean;
  readonly cols?: number;
  readonly rows?: number;
}

/** How a command ended. */
export interface ExecExit {
  readonly status: 'Success' | 'Failure';
  /** Its exit code; 128 + the signal's number when a signal ended it. */
  readonly exitCode: number;
  readonly signal?: string;
}

const CHANNEL = { stdin: 0, stdout: 1, stderr: 2, status: 3, resize: 4, close: 255 } as const;

/** What {@link ExecStream} uses of its WebSocket (ws's): its types stay out of the client's declarations. */
interface ExecSocket {
  readonly readyState: number;
  send(data: Buffer, options: { binary: boolean }, done?: (err?: Error) => void): void;
  pause(): void;
  resume(): void;
  terminate(): void;
  on(event: 'message', listener: (data: Buffer) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  once(event: 'close', listener: (code: number, reason: Buffer) => void): unknown;
}

/** WebSocket's readyState values. */
const CONNECTING = 0;
const OPEN = 1;

/**
 * A running command: write to give it stdin (`end()` closes its stdin), read its stdout (and, with a
 * terminal, everything it prints); `stderr` is its standard error. `exited` resolves with its exit code
 * once it has ended; a connection that drops first rejects it with {@link UnavailableError}
 * `stream_closed`, and destroys the stream with the same error: a drop is never taken for an exit.
 */
export class ExecStream extends Duplex {
  readonly stderr = new PassThrough();
  readonly exited: Promise<ExecExit>;
  /** The exit code, once it has ended. */
  exitCode: number | undefined;
  readonly #ws: ExecSocket;

  /** @internal */
  constructor(ws: ExecSocket) {
    super({ allowHalfOpen: true });
    this.#ws = ws;
    let resolve!: (exit: ExecExit) => void;
    let reject!: (err: Error) => void;
    this.exited = new Promise((res, rej) => ((resolve = res), (reject = rej)));
    this.exited.catch(() => {});
    let exit: ExecExit | undefined;
    ws.on('message', (data: Buffer) => {
      const payload = data.subarray(1);
      if (data[0] === CHANNEL.stdout) {
        if (!this.push(payload)) ws.pause();
      } else if (data[0] === CHANNEL.stderr) this.stderr.write(payload);
      else if (data[0] === CHANNEL.status) {
        const status = JSON.parse(payload.toString('utf8')) as ExecExit;
        exit = {
          status: status.status,
          exitCode: status.exitCode,
          ...(status.signal === undefined ? {} : { signal: status.signal }),
        };
      }
    });
    ws.on('error', () => {});
    ws.once('close', (code, reason) => {
      this.stderr.end();
      if (exit !== undefined) {
        this.exitCode = exit.exitCode;
        this.push(null);
        resolve(exit);
        return;
      }
      const err = new UnavailableError(
        0,
        'stream_closed',
        `The command's connection closed before it ended (${code}${reason.length > 0 ? `: ${reason.toString()}` : ''}); it is hung up.`,
        undefined,
      );
      reject(err);
      this.destroy(err);
    });
  }

  /** The terminal's new size. */
  resize(cols: number, rows: number): void {
    this.#send(CHANNEL.resize, Buffer.from(JSON.stringify({ Width: cols, Height: rows })));
  }

  #send(channel: number, bytes: Buffer, done?: (err?: Error) => void): void {
    if (this.#ws.readyState !== OPEN) {
      done?.();
      return;
    }
    this.#ws.send(Buffer.concat([Buffer.from([channel]), bytes]), { binary: true }, done);
  }

  override _read(): void {
    this.#ws.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    // Done once the bytes are handed to the socket: a slow command slows the writer.
    this.#send(CHANNEL.stdin, chunk, (err) => done(err ?? null));
  }

  override _final(done: (err?: Error | null) => void): void {
    this.#send(CHANNEL.close, Buffer.from([CHANNEL.stdin]), () => done());
  }

  override _destroy(err: Error | null, done: (err: Error | null) => void): void {
    // Gone before the command ended: it is hung up.
    if (this.#ws.readyState === OPEN || this.#ws.readyState === CONNECTING) this.#ws.terminate();
    done(err);
  }
}

/** Opens `GET /v1/sessions/{sessionId}/exec`; rejects with the API's typed error when it refuses. */
export function openExec(
  baseUrl: string,
  apiKey: string | undefined,
  sessionId: string,
  options: ExecOptions,
): Promise<ExecStream> {
  const url = new URL(`${baseUrl.replace(/^http/, 'ws')}/v1/sessions/${encodeURIComponent(sessionId)}/exec`);
  if (options.argv !== undefined) url.searchParams.set('argv', JSON.stringify(options.argv));
  if (options.tty === true) url.searchParams.set('tty', 'true');
  if (options.cols !== undefined) url.searchParams.set('cols', String(options.cols));
  if (options.rows !== undefined) url.searchParams.set('rows', String(options.rows));
  const ws = new WebSocket(url, ['v5.channel.k8s.io'], {
    headers: apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` },
    maxPayload: 2 * 1024 * 1024,
  });
  return new Promise((resolve, reject) => {
    ws.once('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = undefined;
        }
        const headers = new Headers();
        for (const [name, value] of Object.entries(response.headers))
          if (typeof value === 'string') headers.set(name, value);
        reject(toApiError(response.statusCode ?? 0, body, headers));
      });
    });
    ws.once('error', (err) =>
      reject(
        new UnavailableError(0, 'unreachable', `The API at ${baseUrl} could not be reached: ${err.message}`, undefined),
      ),
    );
    ws.once('open', () => {
      ws.removeAllListeners('error');
      resolve(new ExecStream(ws as unknown as ExecSocket));
    });
  });
}
