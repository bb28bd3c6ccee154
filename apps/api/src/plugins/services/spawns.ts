import { BUDGET } from '@cq/service-kit';
import { SpawnService } from '@cq/spawn-handoff';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    /** The admit → enqueue → roll back → reconcile saga behind `POST /v1/spawn`. */
    spawns: SpawnService;
  }
}

/**
 * How long past its pending deadline an admitted session's slot stays held unless a host renews it: time
 * for the host that claims it at the last moment to publish its heartbeat. It also bounds how long an API
 * that dies between holding a slot and handing the session on keeps that slot: PENDING_TIMEOUT_MS + this.
 */
export const HOLD_MARGIN_MS = 5000;

/** The spawn saga and its reconciler, which makes one last, bounded attempt in `onClose`. */
export const spawnsPlugin = fp(
  async (app: FastifyInstance) => {
    const { config, coordinator } = app;
    const spawns = new SpawnService({
      sessions: coordinator.sessions,
      producer: app.spawnQueues,
      log: app.log,
      answerWithinMs: BUDGET.commandMs,
      // With the check off, admissions hold no slot (and cost what they did before it); hosts still
      // hold one for each session they run, so free slots stay right for an autoscaler.
      ...(config.capacityCheck
        ? { capacity: { workers: coordinator.workers, holdMs: config.policy.pendingTimeoutMs + HOLD_MARGIN_MS } }
        : {}),
    });
    app.decorate('spawns', spawns);
    app.addHook('onClose', async () => spawns.close());
  },
  { name: 'spawns', fastify: '5.x', dependencies: ['config', 'coordinator', 'spawn-queues'] },
);
