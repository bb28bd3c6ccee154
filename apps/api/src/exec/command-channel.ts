// The API's end of a command inside a session (the host's end: apps/worker's proxy/session-exec.ts): the
// request line, then frames (@cq/service-kit's exec-frames.ts). Commands, terminals and files all run
// through it.
import type { Socket } from 'node:net';
import { CHANNEL, FrameDecoder, frame, type ExecRequest, type ExecStatus, type Frame } from '@cq/service-kit';

export interface CommandHandlers {
  /** Output of the command (channel 1 or 2). Answer false to pause it until {@link CommandChannel.resume}. */
  onOutput(channel: 1 | 2, bytes: Buffer): boolean | void;
  /** How it ended (sent once, before the host closes the connection). */
  onStatus(status: ExecStatus): void;
  /** The connection closed; `dropped` when no status came first (the host or the network failed). */
  onClose(dropped: boolean): void;
}

/** A command started inside a session, over a connection its host has said OK to. */
export class CommandChannel {
  readonly #socket: Socket;
  readonly #decoder = new FrameDecoder();
  #status: ExecStatus | undefined;

  constructor(socket: Socket, request: ExecRequest, handlers: CommandHandlers) {
    this.#socket = socket;
    socket.on('error', () => {});
    socket.write(`${JSON.stringify(request)}\n`);
    this.#decoder.on('error', () => socket.destroy());
    this.#decoder.on('data', (f: Frame) => {
      if (f.channel === CHANNEL.stdout || f.channel === CHANNEL.stderr) {
        if (handlers.onOutput(f.channel, f.payload) === false) this.pause();
      } else if (f.channel === CHANNEL.status && this.#status === undefined) {
        try {
          this.#status = JSON.parse(f.payload.toString('utf8')) as ExecStatus;
        } catch {
          socket.destroy();
          return;
        }
        handlers.onStatus(this.#status);
      }
    });
    // Closed: once every frame that came is read (a reader that lags still has the status to come), or
    // at once when the connection broke off.
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      handlers.onClose(this.#status === undefined);
    };
    let ended = false;
    socket.once('end', () => (ended = true));
    this.#decoder.once('end', close);
    socket.once('close', () => {
      if (!ended || this.#decoder.destroyed) close();
    });
    socket.pipe(this.#decoder);
    socket.resume();
  }

  /** Sends bytes to the command's stdin; false when they should wait for {@link drained}. */
  write(bytes: Buffer): boolean {
    if (this.#socket.destroyed) return true;
    return this.#socket.write(frame(CHANNEL.stdin, bytes));
  }

  /** Resolves once the connection takes more input. */
  drained(): Promise<void> {
    return new Promise((resolve) => {
      if (this.#socket.destroyed || !this.#socket.writableNeedDrain) resolve();
      else {
        const done = (): void => {
          this.#socket.removeListener('drain', done);
          this.#socket.removeListener('close', done);
          resolve();
        };
        this.#socket.once('drain', done);
        this.#socket.once('close', done);
      }
    });
  }

  /** Closes the command's stdin (it reads end of file). */
  closeStdin(): void {
    if (!this.#socket.destroyed) this.#socket.write(frame(CHANNEL.close, Buffer.from([CHANNEL.stdin])));
  }

  /** A terminal's new size. */
  resize(cols: number, rows: number): void {
    if (!this.#socket.destroyed)
      this.#socket.write(frame(CHANNEL.resize, JSON.stringify({ Width: cols, Height: rows })));
  }

  /** Stops reading its output (backpressure to the command) until {@link resume}. */
  pause(): void {
    this.#decoder.pause();
  }

  resume(): void {
    this.#decoder.resume();
  }

  /** Drops the connection: the host hangs the command up (SIGHUP, then SIGKILL after its grace time). */
  hangUp(): void {
    this.#socket.destroy();
  }

  get status(): ExecStatus | undefined {
    return this.#status;
  }
}
