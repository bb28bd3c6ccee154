// The hop between an API process and a worker host's proxy listener (the contract's session proxy).
// An API process opens a TCP connection to the host's `PROXY_ADVERTISE` address and sends one line, a
// ticket: which session and port it wants (or `exec`: a command run inside the session, exec-frames.ts),
// until when the ticket holds, and an HMAC of that under a key derived from `PROXY_SECRET`. The host
// answers one line, `CQP1 OK` (the connection now carries bytes to and from that port inside the
// session, or the command's framed channels) or `CQP1 ERR <code>` (and closes). Nothing without a valid
// ticket reaches a session. A ticket names one session and port and lives a few seconds: one seen on the
// wire opens nothing else.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The protocol's word, first on every line. */
export const TICKET_PREFIX = 'CQP1';
/** How long a ticket holds after it is made, ms (clock skew between API and hosts included). */
export const TICKET_TTL_MS = 30_000;
/** Longest ticket line a host reads, bytes. */
export const TICKET_MAX_BYTES = 512;
/** The shortest `PROXY_SECRET` accepted. */
export const PROXY_SECRET_MIN_LENGTH = 32;

/** Why a host refused a ticket or could not open the port. */
export type TunnelRefusal = 'unauthorized' | 'no_session' | 'port_closed' | 'unavailable';

export interface Ticket {
  readonly sessionId: string;
  /** A TCP port inside the session, or `exec`: a command run inside it. */
  readonly port: number | 'exec';
  /** Epoch ms after which the ticket is refused. */
  readonly expiresAt: number;
}

const SESSION_ID = /^[0-9a-f-]{1,64}$/;

/** The key tickets are signed with, from the deployment's PROXY_SECRET. */
export function ticketKey(secret: string): Buffer {
  return createHmac('sha256', secret).update('cq session proxy: host ticket').digest();
}

function mac(key: Buffer, body: string): Buffer {
  return createHmac('sha256', key).update(body).digest();
}

/** The line an API process sends first (with its newline). */
export function ticketLine(key: Buffer, ticket: Ticket): string {
  const body = `${TICKET_PREFIX} ${ticket.sessionId} ${ticket.port} ${ticket.expiresAt}`;
  return `${body} ${mac(key, body).toString('hex')}\n`;
}

/** The ticket of `line` (without its newline) if it is well formed, signed with `key` and not expired. */
export function readTicket(key: Buffer, line: string, now: number = Date.now()): Ticket | undefined {
  const parts = line.split(' ');
  if (parts.length !== 5 || parts[0] !== TICKET_PREFIX) return undefined;
  const [, sessionId, portText, expiresText, signature] = parts as [string, string, string, string, string];
  if (!SESSION_ID.test(sessionId) || !/^(\d{1,5}|exec)$/.test(portText) || !/^\d{1,15}$/.test(expiresText))
    return undefined;
  if (!/^[0-9a-f]{64}$/.test(signature)) return undefined;
  const expected = mac(key, parts.slice(0, 4).join(' '));
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) return undefined;
  const port = portText === 'exec' ? portText : Number(portText);
  const expiresAt = Number(expiresText);
  if (port !== 'exec' && (port < 1 || port > 65_535)) return undefined;
  if (expiresAt < now || expiresAt > now + 2 * TICKET_TTL_MS) return undefined;
  return { sessionId, port, expiresAt };
}

/** The host's answer line (with its newline). */
export function answerLine(refusal?: TunnelRefusal): string {
  return refusal === undefined ? `${TICKET_PREFIX} OK\n` : `${TICKET_PREFIX} ERR ${refusal}\n`;
}

/** The host's answer: undefined for OK, the refusal otherwise (an unknown word is `unavailable`). */
export function readAnswer(line: string): TunnelRefusal | undefined {
  if (line === `${TICKET_PREFIX} OK`) return undefined;
  const code = line.startsWith(`${TICKET_PREFIX} ERR `) ? line.slice(TICKET_PREFIX.length + 5) : '';
  return code === 'unauthorized' || code === 'no_session' || code === 'port_closed' ? code : 'unavailable';
}

/** A socket's bytes can be read from, paused and given back (a net.Socket, a TLS one). */
type Rereadable = NodeJS.ReadableStream & { unshift(chunk: Buffer): void };

/**
 * The bytes on `socket` up to and including the first `delimiter`, at most `maxBytes` before it, within
 * `timeoutMs`; bytes after it stay in the socket for whoever reads next (the socket is left paused).
 * Rejects on more bytes without it, the time running out, or the socket ending first; `what` names what
 * was awaited in those errors.
 */
export function readUntil(
  socket: Rereadable,
  delimiter: string,
  maxBytes: number,
  timeoutMs: number,
  what: string,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let seen: Buffer = Buffer.alloc(0);
    const done = (err: Error | undefined, found?: Buffer): void => {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('end', onEnd);
      socket.removeListener('close', onEnd);
      socket.removeListener('error', onEnd);
      socket.pause();
      if (err === undefined) resolve(found!);
      else reject(err);
    };
    const onData = (chunk: Buffer): void => {
      seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
      const at = seen.indexOf(delimiter, 0, 'latin1');
      if (at === -1 ? seen.length > maxBytes : at > maxBytes) {
        done(new Error(`no ${what} within ${maxBytes} bytes`));
        return;
      }
      if (at === -1) return;
      const end = at + delimiter.length;
      const rest = seen.subarray(end);
      done(undefined, seen.subarray(0, end));
      if (rest.length > 0) socket.unshift(rest);
    };
    const onEnd = (): void => done(new Error(`the connection ended before its ${what}`));
    const timer = setTimeout(() => done(new Error(`no ${what} within ${timeoutMs} ms`)), timeoutMs);
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.once('close', onEnd);
    socket.once('error', onEnd);
    socket.resume();
  });
}

/** The first line on `socket`, without its newline: {@link readUntil} a newline. */
export async function readFirstLine(socket: Rereadable, maxBytes: number, timeoutMs: number): Promise<string> {
  const line = await readUntil(socket, '\n', maxBytes, timeoutMs, 'first line');
  return line.subarray(0, -1).toString('latin1');
}
