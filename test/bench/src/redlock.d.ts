// redlock 5's package exports carry no types for ESM imports; the part the benchmark uses.
declare module 'redlock' {
  import type { Cluster, Redis } from 'ioredis';
  export interface Lock {
    release(): Promise<unknown>;
  }
  export default class Redlock {
    constructor(clients: Iterable<Redis | Cluster>, settings?: { retryCount?: number });
    acquire(resources: string[], duration: number): Promise<Lock>;
  }
}
