// Opening a TCP connection to a port inside a running session, for the proxy listener (listener.ts).
// A session with the host's network listens on the host's loopback: the host connects there. A session
// with a network of its own (`none`, `egress`) listens on its namespace's loopback, which no socket of the
// host can reach: socat, started in that namespace by nsenter (util-linux), connects there and carries
// the bytes over its stdin and stdout. nsenter joins the network namespace alone: socat stays a process
// of the host (its PID and mount namespaces, outside the session's cgroup), which the session can
// neither see nor signal.
import { spawn } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { Duplex } from 'node:stream';
import type { TunnelRefusal } from '@cq/service-kit';
import type { SessionNetwork } from '../isolation.js';

/** What the host knows of a running session's network. */
export interface SessionNetTarget {
  readonly network: SessionNetwork;
  /** The process group leader of the session (its network namespace is its own or its child's). */
  readonly pid: number | undefined;
}

/** A connection into a session's port, or why there is none. */
export type PortConnection = { readonly stream: Duplex } | { readonly refused: TunnelRefusal };

/** How long opening a connection into a session may take, ms. */
export const OPEN_TIMEOUT_MS = 5000;

function netnsOf(pid: number | 'self'): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    return undefined;
  }
}

/**
 * A process in the session's network namespace: the group leader itself (`unshare --net` first, for
 * `egress`), or its child (bwrap's sandbox, for `none`: bwrap itself stays in the host's namespace).
 */
export function netnsPid(leader: number): number | undefined {
  const own = netnsOf('self');
  const leaderNs = netnsOf(leader);
  if (leaderNs === undefined) return undefined;
  if (leaderNs !== own) return leader;
  let children: string[];
  try {
    children = readFileSync(`/proc/${leader}/task/${leader}/children`, 'utf8').trim().split(/\s+/);
  } catch {
    return undefined;
  }
  for (const child of children) {
    const ns = child === '' ? undefined : netnsOf(Number(child));
    if (ns !== undefined && ns !== own) return Number(child);
  }
  return undefined;
}

/** A TCP connection to 127.0.0.1:`port` of the host. */
function connectLoopback(port: number): Promise<PortConnection> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, noDelay: true });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ refused: 'unavailable' });
    }, OPEN_TIMEOUT_MS);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve({ stream: socket });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ refused: err.code === 'ECONNREFUSED' ? 'port_closed' : 'unavailable' });
    });
  });
}

/** A connection to 127.0.0.1:`port` in the network namespace of process `pid`, through socat. */
function connectInNamespace(pid: number, port: number): Promise<PortConnection> {
  return new Promise((resolve) => {
    // -t: after one direction ends, the other may go on (an HTTP client that half-closes) for an hour;
    // shut-close: the session's end of the connection closes socat's stdout at once (an answer delimited
    // by the connection's close ends then, not when the API's side ends too).
    const child = spawn(
      'nsenter',
      [
        `--net=/proc/${pid}/ns/net`,
        '--',
        'socat',
        '-d',
        '-d',
        '-t',
        '3600',
        'STDIO,shut-close',
        `TCP:127.0.0.1:${port},nodelay`,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let said = '';
    let settled = false;
    const settle = (result: PortConnection): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if ('refused' in result) child.kill('SIGKILL');
      resolve(result);
    };
    const timer = setTimeout(() => settle({ refused: 'unavailable' }), OPEN_TIMEOUT_MS);
    child.stderr.on('data', (chunk: Buffer) => {
      if (settled) return;
      said = (said + chunk.toString()).slice(-2000);
      if (said.includes('starting data transfer loop')) {
        const stream = Duplex.from({ readable: child.stdout, writable: child.stdin });
        // The stream's end ends socat (and socat's, the stream): either side's close closes both.
        stream.once('close', () => child.kill('SIGKILL'));
        child.once('exit', () => stream.destroy());
        settle({ stream });
      }
    });
    child.once('error', () => settle({ refused: 'unavailable' }));
    child.once('exit', () => settle({ refused: /Connection refused/.test(said) ? 'port_closed' : 'unavailable' }));
    for (const stream of [child.stdin, child.stdout]) stream.on('error', () => {});
  });
}

/** Opens a connection to `port` inside the session `target` describes. */
export function openSessionPort(target: SessionNetTarget, port: number): Promise<PortConnection> {
  if (target.network === 'host') return connectLoopback(port);
  if (target.pid === undefined) return Promise.resolve({ refused: 'no_session' });
  const inside = netnsPid(target.pid);
  if (inside === undefined) return Promise.resolve({ refused: 'no_session' });
  return connectInNamespace(inside, port);
}
