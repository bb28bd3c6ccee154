/** Every node listens on, and announces, this loopback address. */
export const HOST = '127.0.0.1';

/** A host and port, as `new Cluster(nodes)` of ioredis takes them. */
export interface ClusterNodeAddress {
  readonly host: string;
  readonly port: number;
}
