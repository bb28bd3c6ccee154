// Worker hosts and pools: `GET /v1/hosts` (each host, its isolation, the free slots), a host's drain,
// and `GET /v1/pools`.
import { WORKER_ID_PATTERN, containments, sessionFilesystems, sessionNetworks } from '../vocabulary.js';
import { z } from 'zod';
import { poolSchema } from './common.js';

export const workerParams = z
  .object({
    workerId: z
      .string()
      .regex(WORKER_ID_PATTERN, 'must be 1 to 128 characters of A-Z a-z 0-9 . _ : @ -')
      .describe("A worker host's WORKER_ID"),
  })
  .strict();

export const hostView = z
  .object({
    workerId: z.string(),
    pool: z.string().describe('The pool the host serves (POOL)'),
    state: z.enum(['active', 'draining']),
    slots: z.number().int(),
    busy: z.number().int(),
    heartbeatAt: z.string(),
    startedAt: z.string(),
    containment: z
      .enum(containments)
      .describe(
        'How the host keeps every process of a session inside it: namespace (a PID namespace per session) ' +
          'or group (the process group only: a process that leaves the group is not caught)',
      ),
    isolation: z
      .object({
        network: z
          .enum(sessionNetworks)
          .describe(
            'What a session reaches on the network: none (a network namespace of its own, loopback only), ' +
              "egress (that plus outbound connections to public addresses) or host (the host's network)",
          ),
        filesystem: z
          .enum(sessionFilesystems)
          .describe(
            "What a session sees of the host's files: private (its own /tmp, /dev/shm and SESSION_DIR, the rest " +
              "read-only) or shared (the host's filesystem as its user may use it)",
          ),
        cpus: z
          .number()
          .nullable()
          .describe('The CPUs one session may use at most, measured over any second (SESSION_CPUS); null: no cap'),
      })
      .describe(
        'How the host keeps its sessions apart from it and from each other (a host that does not say: ' +
          'network host, filesystem shared, cpus null)',
      ),
  })
  .meta({ id: 'Host' });

export const hostsQuery = z
  .object({ pool: poolSchema.optional().describe("Only this pool's hosts, and its free slots") })
  .strict();

export const poolView = z
  .object({
    pool: z.string(),
    hosts: z.number().int().describe('Live hosts serving it'),
    slots: z.number().int().describe("Slots of its live hosts (active hosts' SLOTS, draining hosts' running sessions)"),
    busy: z.number().int().describe('Sessions its hosts run'),
    free: z.number().int().describe('Slots not held by an admitted, unended session of the pool'),
    pending: z.number().int().describe('Sessions of the pool waiting for a host (its queued spawn jobs)'),
  })
  .meta({ id: 'Pool' });

export const poolsView = z.object({ pools: z.array(poolView) }).meta({ id: 'Pools' });

export const hostsView = z
  .object({
    hosts: z.array(hostView),
    freeSlots: z
      .number()
      .int()
      .describe(
        'Slots of live, not draining hosts, less the sessions admitted and not yet ended (of the pool, with ?pool=)',
      ),
  })
  .meta({ id: 'Hosts' });
