// A terminal (or any interactive command) inside a session over a WebSocket: GET /v1/sessions/{id}/exec
// with Kubernetes' exec framing (subprotocol `v5.channel.k8s.io`): each binary message's first byte is its
// channel (0 stdin, 1 stdout, 2 stderr, 3 status, 4 resize, 255 close a channel), the rest its bytes,
// one to one with the frames of the hop to the host (command-channel.ts). The status (JSON, channel 3)
// always comes before a normal close (1000): a close without it is a dropped connection (1011 with a
// reason when the host's side broke off). A WebSocket that drops hangs the command up (SIGHUP, then
// SIGKILL after the host's SESSION_GRACE_MS).
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { CHANNEL, readSize, type ExecStatus } from '@cq/service-kit';
import type { CommandChannel, CommandHandlers } from './command-channel.js';

export const EXEC_PROTOCOL = 'v5.channel.k8s.io';
/** A WebSocket that answers no ping within this long is closed, ms. */
export const PING_EVERY_MS = 20_000;
/** Output the WebSocket may hold unsent before the command's output waits, bytes. */
const SEND_HIGH_WATER = 1024 * 1024;

/** The status message as Kubernetes clients read it, with the contract's `exitCode` (and `signal`). */
export function k8sStatus(status: ExecStatus): Record<string, unknown> {
  return {
    metadata: {},
    status: status.status,
    exitCode: status.exitCode,
    ...(status.signal === undefined ? {} : { signal: status.signal }),
    ...(status.status === 'Success'
      ? {}
      : {
          message:
            status.message ??
            (status.reason === 'timeout'
              ? 'command timed out'
              : status.reason === 'session_ended'
                ? 'the session ended'
                : `command terminated with non-zero exit code: ${status.exitCode}`),
          reason: status.reason === 'start_failed' ? 'InternalError' : 'NonZeroExitCode',
          details: { causes: [{ reason: 'ExitCode', message: String(status.exitCode) }] },
        }),
  };
}

const server = new WebSocketServer({
  noServer: true,
  maxPayload: 1024 * 1024,
  handleProtocols: (offered) => (offered.has(EXEC_PROTOCOL) ? EXEC_PROTOCOL : false),
});

/**
 * Upgrades `request` (already authorized, its command's host already reached: a refusal was answered
 * as HTTP) to the exec WebSocket; `start` sends the command with the handlers it is given.
 */
export function serveTerminal(
  request: IncomingMessage,
  socket: Socket,
  start: (handlers: CommandHandlers) => CommandChannel,
  onEnd: (how: string) => void,
): void {
  server.handleUpgrade(request, socket, Buffer.alloc(0), (ws: WebSocket) => {
    let finished = false;
    const end = (code: number, reason: string): void => {
      if (finished) return;
      finished = true;
      clearInterval(ping);
      onEnd(reason);
      ws.close(code, reason);
    };
    /** Sends one message; false when the WebSocket holds too much unsent (the command then waits). */
    const send = (channelByte: number, bytes: Buffer): boolean => {
      if (ws.readyState !== ws.OPEN) return true;
      ws.send(Buffer.concat([Buffer.from([channelByte]), bytes]), { binary: true });
      if (ws.bufferedAmount <= SEND_HIGH_WATER) return true;
      socket.once('drain', function resume() {
        if (ws.bufferedAmount > SEND_HIGH_WATER) socket.once('drain', resume);
        else channel.resume();
      });
      return false;
    };
    const channel: CommandChannel = start({
      onOutput: (ch, bytes) => send(ch, bytes),
      onStatus: (status) => {
        send(CHANNEL.status, Buffer.from(JSON.stringify(k8sStatus(status))));
        end(1000, status.status === 'Success' ? 'exited' : `exited ${status.exitCode}`);
      },
      onClose: (dropped) => {
        if (dropped) end(1011, "the session's host dropped the command");
      },
    });
    ws.on('message', (data: RawData, isBinary) => {
      const message = Buffer.isBuffer(data) ? data : Buffer.concat(data as Buffer[]);
      if (message.length === 0) return;
      // A text message: its first character's code is the channel (some clients send text).
      const bytes = isBinary ? message : Buffer.from(message);
      const payload = bytes.subarray(1);
      switch (bytes[0]) {
        case CHANNEL.stdin:
          if (!channel.write(payload)) {
            ws.pause();
            void channel.drained().then(() => ws.resume());
          }
          break;
        case CHANNEL.resize: {
          const size = readSize(payload);
          if (size !== undefined) channel.resize(size.cols, size.rows);
          break;
        }
        case CHANNEL.close:
          if (payload[0] === CHANNEL.stdin) channel.closeStdin();
          break;
      }
    });
    ws.on('error', () => {});
    ws.on('close', () => {
      if (!finished) {
        finished = true;
        clearInterval(ping);
        onEnd('client closed');
      }
      // Gone before the command ended: it is hung up.
      if (channel.status === undefined) channel.hangUp();
    });
    let alive = true;
    ws.on('pong', () => (alive = true));
    const ping = setInterval(() => {
      if (!alive) {
        ws.terminate();
        return;
      }
      alive = false;
      ws.ping();
    }, PING_EVERY_MS);
    ping.unref();
  });
}
