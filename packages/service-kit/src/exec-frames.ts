// The hop between an API process and a worker host for work inside a session (the contract's "Working
// inside a session"): after a ticket for `exec` (proxy-ticket.ts) and the host's `CQP1 OK`, the API
// sends one JSON line, the command ({@link ExecRequest}), and from then on both sides send frames: one
// byte of channel, four of length (big-endian), the payload. The channels are Kubernetes' exec channels
// (`v5.channel.k8s.io`), so that a terminal's WebSocket carries the same messages one to one: 0 stdin
// (API → host), 1 stdout and 2 stderr (host → API), 3 the final status (host → API, JSON, sent once
// before the host closes the connection: a connection that closes without it was dropped), 4 resize
// (API → host, JSON `{"Width","Height"}`), 255 close a channel (its payload: the channel's byte; API →
// host closes the command's stdin).
import { Transform, type TransformCallback } from 'node:stream';
import { z } from 'zod';

export const CHANNEL = { stdin: 0, stdout: 1, stderr: 2, status: 3, resize: 4, close: 255 } as const;

/** Largest payload of one frame, bytes. */
export const FRAME_MAX_BYTES = 1024 * 1024;
/** Longest request line, bytes (argv and env). */
export const EXEC_REQUEST_MAX_BYTES = 256 * 1024;

/** A terminal's size: at most this many columns or rows. */
const TERMINAL_MAX = 1000;

/** The command the API asks a host to run inside a session. */
export const execRequestSchema = z
  .object({
    argv: z.array(z.string().max(65_536)).min(1).max(4096),
    env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string().max(65_536)).default({}),
    /** Where it runs, as the session sees its files; the session's SESSION_DIR when absent. */
    cwd: z.string().startsWith('/').max(4096).optional(),
    tty: z.boolean().default(false),
    cols: z.number().int().min(1).max(TERMINAL_MAX).default(80),
    rows: z.number().int().min(1).max(TERMINAL_MAX).default(24),
    /** Killed with its processes after this long, ms; no limit when absent. */
    timeoutMs: z
      .number()
      .int()
      .min(1)
      .max(7 * 24 * 3_600_000)
      .optional(),
  })
  .strict();
export type ExecRequest = z.input<typeof execRequestSchema>;

/** The last frame of a command (channel 3): how it ended. */
export interface ExecStatus {
  readonly status: 'Success' | 'Failure';
  /** The exit code; 128 + the signal's number when a signal ended it. */
  readonly exitCode: number;
  /** The signal that ended it (`SIGKILL`), if one did. */
  readonly signal?: string;
  /**
   * Why it ended besides its own exit: `timeout` (it outlived `timeoutMs`), `hangup` (the connection to
   * it dropped), `start_failed` (it could not start), `session_ended`.
   */
  readonly reason?: 'timeout' | 'hangup' | 'start_failed' | 'session_ended';
  readonly message?: string;
}

/** A resize frame's terminal size (`{"Width","Height"}`, 1 to 1000 each), or undefined when it says none. */
export function readSize(payload: Buffer): { cols: number; rows: number } | undefined {
  let size: { Width?: unknown; Height?: unknown };
  try {
    size = JSON.parse(payload.toString('utf8')) as typeof size;
  } catch {
    return undefined;
  }
  const cols = Number(size?.Width);
  const rows = Number(size?.Height);
  const valid = (n: number): boolean => Number.isInteger(n) && n >= 1 && n <= TERMINAL_MAX;
  return valid(cols) && valid(rows) ? { cols, rows } : undefined;
}

/** One frame on the wire; a payload given in pieces is sent as one (copied once). */
export function frame(channel: number, payload: Buffer | string | readonly Buffer[] = Buffer.alloc(0)): Buffer {
  const pieces = typeof payload === 'string' ? [Buffer.from(payload)] : Buffer.isBuffer(payload) ? [payload] : payload;
  let length = 0;
  for (const piece of pieces) length += piece.length;
  const head = Buffer.allocUnsafe(5);
  head.writeUInt8(channel, 0);
  head.writeUInt32BE(length, 1);
  return Buffer.concat([head, ...pieces], 5 + length);
}

/** A decoded frame. */
export interface Frame {
  readonly channel: number;
  readonly payload: Buffer;
}

/**
 * Bytes in, {@link Frame}s out (an object-mode readable side): backpressure passes through, a reader
 * that stops reading stops the bytes. A frame over {@link FRAME_MAX_BYTES} is an error.
 */
export class FrameDecoder extends Transform {
  #pending: Buffer = Buffer.alloc(0);

  constructor() {
    super({ readableObjectMode: true, readableHighWaterMark: 16 });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.#pending = this.#pending.length === 0 ? chunk : Buffer.concat([this.#pending, chunk]);
    while (this.#pending.length >= 5) {
      const length = this.#pending.readUInt32BE(1);
      if (length > FRAME_MAX_BYTES) {
        done(new Error(`a frame of ${length} bytes (at most ${FRAME_MAX_BYTES})`));
        return;
      }
      if (this.#pending.length < 5 + length) break;
      this.push({ channel: this.#pending[0]!, payload: this.#pending.subarray(5, 5 + length) } satisfies Frame);
      this.#pending = this.#pending.subarray(5 + length);
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    done(this.#pending.length === 0 ? undefined : new Error('the connection ended inside a frame'));
  }
}
