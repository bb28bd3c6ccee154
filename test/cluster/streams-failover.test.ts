import { Keys, slotOf } from '@cq/coordinator';
import { startRedisCluster } from '@cq/test-harness';
import { describe, it, onTestFinished } from 'vitest';
import { expectThroughFault } from '../support/streams.js';
import { startSystem } from '../support/system.js';

describe('output follows and event streams through a Cluster failover', () => {
  it("the master of the followed session's slot is SIGKILLed and its replica takes over: follows and event readers go on, none lost or repeated, new ones are live", async () => {
    // A cluster of this file's own: the shared one stays whole for the other files.
    const cluster = await startRedisCluster();
    onTestFinished(() => cluster.stop());
    // The session outlives the failover (about 3 s here): its lease and its lifetime are longer.
    const system = await startSystem({
      target: { kind: 'cluster', seeds: cluster.seeds },
      workers: 1,
      workerEnv: { LEASE_MS: '10000' },
    });
    const userId = 'followed-through-failover';
    const master = await cluster.masterOf(slotOf(new Keys(system.keyPrefix).user(userId).session));
    await expectThroughFault(
      system,
      userId,
      async () => {
        await master.halt('SIGKILL');
        await cluster.waitUntilOk(20_000);
      },
      15_000,
    );
  });
});
