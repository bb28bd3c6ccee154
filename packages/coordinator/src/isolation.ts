// How a worker host keeps a session's processes inside it and its sessions apart, as its heartbeat says
// and its record in the registry keeps it (`GET /v1/hosts`).
import { containments, sessionFilesystems, sessionNetworks } from '@cq/contract';
import { InvalidArgumentError } from './errors.js';

export { containments };
/** How a worker host keeps a session's processes inside it; see {@link containments}. */
export type Containment = (typeof containments)[number];

export { sessionNetworks, sessionFilesystems };
/** What a host's sessions reach on the network; see {@link sessionNetworks}. */
export type SessionNetwork = (typeof sessionNetworks)[number];
/** What a host's sessions see of its files; see {@link sessionFilesystems}. */
export type SessionFilesystem = (typeof sessionFilesystems)[number];

/** How a worker host keeps its sessions apart from the host and from each other (`GET /v1/hosts`). */
export interface Isolation {
  /** What a session reaches on the network. */
  readonly network: SessionNetwork;
  /** What a session sees of the host's files. */
  readonly filesystem: SessionFilesystem;
  /** The CPUs one session may use at most (`SESSION_CPUS`); null: no cap. */
  readonly cpus: number | null;
}

/** The isolation of a host that says nothing of it (an older host): none. */
export const NO_ISOLATION: Isolation = Object.freeze({ network: 'host', filesystem: 'shared', cpus: null });

/** A host record's containment: `group` unless it says `namespace` (a record from an older host says nothing). */
export function containmentOf(value: unknown): Containment {
  return value === 'namespace' ? 'namespace' : 'group';
}

/** A heartbeat's isolation, checked (an InvalidArgumentError names what is wrong). */
export function assertIsolation(isolation: Isolation): Isolation {
  const { network, filesystem, cpus } = isolation;
  if (!(sessionNetworks as readonly string[]).includes(network))
    throw new InvalidArgumentError(`isolation.network must be one of ${sessionNetworks.join(', ')}`);
  if (!(sessionFilesystems as readonly string[]).includes(filesystem))
    throw new InvalidArgumentError(`isolation.filesystem must be one of ${sessionFilesystems.join(', ')}`);
  if (cpus !== null && (typeof cpus !== 'number' || !Number.isFinite(cpus) || cpus <= 0))
    throw new InvalidArgumentError('isolation.cpus must be a number above 0, or null (no cap)');
  return isolation;
}

/**
 * A host record's isolation from its `network`, `filesystem` and `cpus` fields: what is missing or
 * unknown reads as none (`host`, `shared`, no cap), as for a record from an older host that says nothing.
 */
export function isolationOf(network: unknown, filesystem: unknown, cpus: unknown): Isolation {
  const cap = typeof cpus === 'string' && cpus !== '' ? Number(cpus) : NaN;
  return {
    network: (sessionNetworks as readonly unknown[]).includes(network) ? (network as SessionNetwork) : 'host',
    filesystem: filesystem === 'private' ? 'private' : 'shared',
    cpus: Number.isFinite(cap) && cap > 0 ? cap : null,
  };
}
