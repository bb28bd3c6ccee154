import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { HOST } from './address.js';

/** A cluster node listens on its port plus this for the cluster bus. */
const BUS_OFFSET = 10_000;
const PORT_MIN = 20_000;
const PORT_MAX = 39_999;

async function portFree(port: number): Promise<boolean> {
  const server = createServer();
  try {
    server.listen(port, HOST);
    await once(server, 'listening');
  } catch {
    return false;
  }
  server.close();
  await once(server, 'close');
  return true;
}

/** The kernel's range of ports for outgoing connections, which a halted node's ports should stay out of. */
export async function ephemeralRange(): Promise<[number, number] | undefined> {
  try {
    const [low, high] = (await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'))
      .trim()
      .split(/\s+/)
      .map(Number);
    return low !== undefined && high !== undefined && low > 0 && high >= low ? [low, high] : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A random port in 20000–39999 such that it and its bus port (port + 10000) are both free and not in
 * `taken`; adds both to `taken`. Pairs outside the kernel's ephemeral range are preferred: an outgoing
 * connection could otherwise take a halted node's port and make {@link RedisServer.resume} fail.
 */
export async function clusterPort(taken: Set<number>, ephemeral: [number, number] | undefined): Promise<number> {
  const outside = (p: number): boolean => ephemeral === undefined || p < ephemeral[0] || p > ephemeral[1];
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = PORT_MIN + Math.floor(Math.random() * (PORT_MAX - PORT_MIN + 1));
    const bus = port + BUS_OFFSET;
    if (taken.has(port) || taken.has(bus)) continue;
    if (attempt < 100 && !(outside(port) && outside(bus))) continue;
    // Reserved before the first await, so nodes starting side by side never pick the same pair.
    taken.add(port).add(bus);
    if ((await portFree(port)) && (await portFree(bus))) return port;
    taken.delete(port);
    taken.delete(bus);
  }
  throw new Error(`no free port pair (p, p+${BUS_OFFSET}) found in ${PORT_MIN}–${PORT_MAX}: free some ports there`);
}
