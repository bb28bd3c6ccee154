// Opening a TCP connection to a port inside a running session, for the proxy listener (listener.ts).
// A session with the host's network listens on the host's loopback: the host connects there. A session
// with a network of its own (`none`, `egress`) listens on its namespace's loopback, which no socket of the
// host can reach: socat, started in that namespace by nsenter (util-linux), connects there and carries
// the bytes over its stdin and stdout. nsenter joins the network namespace alone: socat stays a process
// of the host (its PID and mount namespaces, outside the session's cgroup), which the session can
// neither see nor signal.
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import type { TunnelRefusal } from '@cq/service-kit';
import type { SessionNetwork } from '../isolation.js';

/** What the host knows of a running session's network. */
export interface SessionNetTarget {
  readonly network: SessionNetwork;
  /** The process group leader of the session (its network namespace is its own or its child's). */
  readonly pid: number | undefined;
}

/** A connection into a session's port, or why there is none. */
/** Bytes to and from a session's port: a socket of the host, or socat's stdout and stdin. */
export interface PortPipe {
  readonly readable: Readable;
  readonly writable: Writable;
  /** Ends it now (closing the connection into the session). */
  destroy(): void;
  /** Calls `listener` once it is closed, whichever side closed it. */
  onClose(listener: () => void): void;
}

export type PortConnection = { readonly stream: PortPipe } | { readonly refused: TunnelRefusal };

/** How long opening a connection into a session may take, ms. */
export const OPEN_TIMEOUT_MS = 5000;

/** The namespace of `kind` process `pid` is in (`net:[4026532…]`), or undefined once it is gone. */
export function namespaceOf(pid: number | 'self', kind: 'net' | 'pid' | 'user'): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/${kind}`);
  } catch {
    return undefined;
  }
}

/** The children of process `pid`, read from /proc (none once it is gone). */
export function childrenOf(pid: number): number[] {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    return text === '' ? [] : text.split(/\s+/).map(Number);
  } catch {
    return [];
  }
}

/**
 * The first process below `leader` ({@link firstInTree}) whose namespace of `kind` is not the host's:
 * where a session's own namespaces are entered. For `net`: the leader itself (`unshare --net` first,
 * for `egress`), or its child (bwrap's sandbox, for `none`: bwrap itself stays in the host's
 * namespace). For `pid`: the session's init.
 */
export function inOwnNamespace(leader: number, kind: 'net' | 'pid'): number | undefined {
  const own = namespaceOf('self', kind);
  return firstInTree(leader, (pid) => {
    const ns = namespaceOf(pid, kind);
    return ns !== undefined && ns !== own;
  });
}

/** The first process, breadth first from `leader` (itself included) down 8 levels, that `test` accepts. */
export function firstInTree(leader: number, test: (pid: number) => boolean): number | undefined {
  let level = [leader];
  for (let depth = 0; depth < 8 && level.length > 0; depth++) {
    for (const pid of level) if (test(pid)) return pid;
    level = level.flatMap(childrenOf);
  }
  return undefined;
}

/** A process in the session's network namespace ({@link inOwnNamespace}). */
export function netnsPid(leader: number): number | undefined {
  return inOwnNamespace(leader, 'net');
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
      socket.on('error', () => {});
      resolve({
        stream: {
          readable: socket,
          writable: socket,
          destroy: () => socket.destroy(),
          onClose: (listener) => void socket.once('close', listener),
        },
      });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ refused: err.code === 'ECONNREFUSED' ? 'port_closed' : 'unavailable' });
    });
  });
}

/** A connection to 127.0.0.1:`port` in the network namespace of process `pid`, through socat. */
function connectInNamespace(pid: number, port: number): Promise<PortConnection> {
  // A host that is not root gave its sessions a user namespace too (bwrap --unshare-user): their network
  // namespace is entered from inside it, where the host's user has the capability to.
  const user =
    namespaceOf('self', 'user') !== namespaceOf(pid, 'user')
      ? [`--user=/proc/${pid}/ns/user`, '--preserve-credentials']
      : [];
  return new Promise((resolve) => {
    // -t: after one direction ends, the other may go on (an HTTP client that half-closes) for an hour;
    // shut-close: the session's end of the connection closes socat's stdout at once (an answer delimited
    // by the connection's close ends then, not when the API's side ends too).
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(
        'nsenter',
        [
          ...user,
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
    } catch {
      // A spawn that throws at once (out of processes or descriptors).
      resolve({ refused: 'unavailable' });
      return;
    }
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
    child.stderr!.on('data', (chunk: Buffer) => {
      if (settled) return;
      said = (said + chunk.toString()).slice(-2000);
      if (said.includes('starting data transfer loop')) {
        // Piped as they are (no Duplex around them: one stream less per chunk). socat's end (its pipes
        // closed, everything read) closes the pipe; destroying the pipe kills socat.
        const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
        settle({
          stream: {
            readable: child.stdout!,
            writable: child.stdin!,
            destroy: () => child.kill('SIGKILL'),
            onClose: (listener) => void closed.then(listener),
          },
        });
      }
    });
    child.once('error', () => settle({ refused: 'unavailable' }));
    // 'close', not 'exit': its last words on stderr are read by then.
    child.once('close', () => settle({ refused: /Connection refused/.test(said) ? 'port_closed' : 'unavailable' }));
    for (const stream of [child.stdin!, child.stdout!]) stream.on('error', () => {});
  });
}

/** The processes below `leader` (itself included), read from /proc at one moment. */
function processTree(leader: number): number[] {
  const found = [leader];
  for (let i = 0; i < found.length && found.length < 100_000; i++) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${found[i]}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      try {
        const children = readFileSync(`/proc/${found[i]}/task/${task}/children`, 'utf8').trim();
        if (children !== '') found.push(...children.split(/\s+/).map(Number));
      } catch {
        // gone meanwhile
      }
    }
  }
  return found;
}

/** The inodes of the sockets listening on `port` of the host's loopback (or every address). */
function listeningOn(port: number): Set<string> {
  const inodes = new Set<string>();
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let lines: string[];
    try {
      lines = readFileSync(table, 'utf8').split('\n').slice(1);
    } catch {
      continue;
    }
    for (const line of lines) {
      const fields = line.trim().split(/\s+/);
      // local address (ip:port), state 0A (LISTEN), inode
      if (fields.length > 9 && fields[1]!.endsWith(`:${hex}`) && fields[3] === '0A') inodes.add(fields[9]!);
    }
  }
  return inodes;
}

/**
 * Whether a process of the session whose group `leader` leads holds a socket listening on `port`: on the
 * host's network every session shares one loopback, and a token opens only its own session's port.
 */
export function sessionListensOn(leader: number, port: number): boolean {
  const listening = listeningOn(port);
  if (listening.size === 0) return false;
  for (const pid of processTree(leader)) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (match !== null && listening.has(match[1]!)) return true;
      } catch {
        // closed meanwhile
      }
    }
  }
  return false;
}

/** Opens a connection to `port` inside the session `target` describes. */
export function openSessionPort(target: SessionNetTarget, port: number): Promise<PortConnection> {
  if (target.network === 'host') {
    if (target.pid === undefined) return Promise.resolve({ refused: 'no_session' });
    // Another session's port, or the host's own services, are not this session's.
    if (!sessionListensOn(target.pid, port)) return Promise.resolve({ refused: 'port_closed' });
    return connectLoopback(port);
  }
  if (target.pid === undefined) return Promise.resolve({ refused: 'no_session' });
  const inside = netnsPid(target.pid);
  if (inside === undefined) return Promise.resolve({ refused: 'no_session' });
  return connectInNamespace(inside, port);
}
