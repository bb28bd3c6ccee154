import type { Sweeper } from '@cq/coordinator';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyInstance {
    sweeper: Sweeper;
  }
}

/** Options of the sweeper plugin. */
export interface SweeperPluginOptions {
  /** Start the sweeper once the app is ready. @defaultValue true */
  sweep?: boolean;
}

/** The sweeper (ends overdue sessions as `lost`): starts in `onReady` unless told not to, stops in `onClose`. */
export const sweeperPlugin = fp(
  async (app: FastifyInstance, options: SweeperPluginOptions) => {
    const sweeper = app.coordinator.sweeper({
      intervalMs: app.config.sweepIntervalMs,
      onError: (err) => app.log.debug({ err }, 'sweep failed; retrying at the next interval'),
      onSwept: (result) => app.log.info(result, 'sessions ended as lost'),
      onRecounted: (corrected) =>
        app.log.warn(
          { corrected },
          "pools' slot totals had drifted from their hosts' shares (Redis replayed or lost some writes): recounted",
        ),
      onFullScan: (scan) =>
        app.log.info(
          { sweeperId: sweeper.id, ms: scan.ms, liveSlots: scan.liveSlots, fullScans: scan.count },
          scan.count === 1
            ? 'took the sweeping turn: read every slot; from now on only those with live sessions'
            : 'read every slot again (the turn was taken anew, or the event subscription was lost)',
        ),
    });
    app.decorate('sweeper', sweeper);
    app.addHook('onReady', async () => {
      if (options.sweep === false) return;
      sweeper.start();
      app.log.info(
        { sweeperId: sweeper.id, intervalMs: app.config.sweepIntervalMs },
        'sweeping for overdue sessions in turns with the other API processes',
      );
    });
    app.addHook('onClose', async () => sweeper.stop());
  },
  { name: 'sweeper', fastify: '5.x', dependencies: ['config', 'coordinator'] },
);
