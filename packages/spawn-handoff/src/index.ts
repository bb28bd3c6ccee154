export { SPAWN_JOB, spawnJobId, spawnJobOptions, spawnJobSchema, type SpawnJob } from './job.js';
export { SPAWN_QUEUE, spawnQueueShards, type SpawnQueueShard } from './shards.js';
export { SpawnQueues, type SpawnProducer } from './producer.js';
export { spawnConsumers, handBack, type SpawnConsumerOptions } from './consumer.js';
export { AdmissionReconciler } from './reconciler.js';
export { SpawnService, type SpawnOutcome, type SpawnServiceOptions } from './spawn-service.js';
export type { SpawnLogger } from './logger.js';
