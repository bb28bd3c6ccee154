// The API's end of the hop to a worker host's proxy listener: a TCP connection to the host's advertised
// address, a ticket for (session, port), and the host's one-line answer. After `OK` the socket carries
// bytes to and from the session's port.
import { connect, type Socket } from 'node:net';
import { readAnswer, readFirstLine, ticketLine, TICKET_TTL_MS, type TunnelRefusal } from '@cq/service-kit';

/** How long reaching a host and hearing its answer may take, ms. */
export const TUNNEL_TIMEOUT_MS = 2000;

/** Why no tunnel was opened: the host's refusal, or `host_unreachable`. */
export class TunnelError extends Error {
  readonly refusal: TunnelRefusal | 'host_unreachable';
  constructor(refusal: TunnelRefusal | 'host_unreachable', message: string) {
    super(message);
    this.name = 'TunnelError';
    this.refusal = refusal;
  }
}

function splitAddress(address: string): { host: string; port: number } {
  const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(address);
  if (match === null)
    throw new TunnelError('host_unreachable', `the host's proxy address "${address}" is not host:port`);
  return { host: match[1]!, port: Number(match[2]) };
}

/**
 * Opens a tunnel to `port` of session `sessionId` (or, for `exec`, a connection to a command inside it)
 * through the host listening at `address`.
 */
export function openTunnel(key: Buffer, address: string, sessionId: string, port: number | 'exec'): Promise<Socket> {
  return new Promise((resolve, reject) => {
    let target: { host: string; port: number };
    try {
      target = splitAddress(address);
    } catch (err) {
      reject(err);
      return;
    }
    const socket = connect({ ...target, noDelay: true });
    const fail = (err: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(
      () =>
        fail(
          new TunnelError(
            'host_unreachable',
            `the session's host (${address}) did not answer within ${TUNNEL_TIMEOUT_MS} ms`,
          ),
        ),
      TUNNEL_TIMEOUT_MS,
    );
    socket.once('error', (err) =>
      fail(new TunnelError('host_unreachable', `the session's host (${address}): ${err.message}`)),
    );
    socket.once('connect', () => {
      socket.write(ticketLine(key, { sessionId, port, expiresAt: Date.now() + TICKET_TTL_MS }));
      readFirstLine(socket, 256, TUNNEL_TIMEOUT_MS).then(
        (line) => {
          const refusal = readAnswer(line);
          if (refusal !== undefined) {
            fail(new TunnelError(refusal, `the session's host refused: ${refusal}`));
            return;
          }
          clearTimeout(timer);
          socket.removeAllListeners('error');
          resolve(socket);
        },
        (err: Error) => fail(new TunnelError('host_unreachable', `the session's host (${address}): ${err.message}`)),
      );
    });
  });
}
