import { Redis } from 'ioredis';

/** One command a client sent, as MONITOR reported it. */
export interface Seen {
  readonly args: string[];
  readonly source: string;
}

/**
 * Records the commands Redis receives from one client (by its local address), leaving out those run
 * inside scripts, which MONITOR reports with the source `lua`. Used to count round trips.
 */
export async function watchClient(
  client: Redis,
  url: string,
): Promise<{ seen: Seen[]; settle(): Promise<void>; stop(): Promise<void> }> {
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  const port = client.stream.localPort;
  const seen: Seen[] = [];
  const watcher = new Redis(url);
  const monitor = await watcher.monitor();
  // A MONITOR line that arrives while the connection closes (its status no longer "monitoring") is taken
  // by ioredis for a reply with no command waiting, and emitted as an error: the observer's teardown,
  // not the system's doing. (Busy systems, e.g. with blocking queue workers, make it likely.)
  monitor.on('error', () => {});
  let marker = 0;
  const markers = new Map<string, () => void>();
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (args[0]?.toLowerCase() === 'echo' && markers.has(args[1] ?? '')) {
      markers.get(args[1]!)!();
      return;
    }
    if (source.endsWith(`:${port}`)) seen.push({ args, source });
  });
  // The MONITOR stream is asynchronous: an ECHO from the same client marks "everything before it is in".
  const settle = async (): Promise<void> => {
    const id = `monitor-marker-${marker++}`;
    const arrived = new Promise<void>((resolve) => markers.set(id, resolve));
    await client.echo(id);
    await arrived;
  };
  return {
    seen,
    settle,
    stop: async () => {
      monitor.disconnect();
      watcher.disconnect();
    },
  };
}
