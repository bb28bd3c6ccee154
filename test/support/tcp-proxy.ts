import { createConnection, createServer, type Server, type Socket } from 'node:net';

/** A TCP proxy on 127.0.0.1 in front of one server, which a test can cut off and heal. */
export interface TcpProxy {
  /** `redis://127.0.0.1:<port>`: where the proxied clients connect. */
  readonly url: string;
  /**
   * Stops forwarding in both directions without closing anything, as a network partition does:
   * connections stay open, bytes sent wait in buffers, nothing arrives. New connections are accepted
   * and wait too.
   */
  cut(): void;
  /** Forwards again: whatever waited is delivered. */
  heal(): void;
  /**
   * From now on, whatever Redis sends on a connection that has subscribed to a channel is dropped, the
   * connection staying open: a subscription that looks alive while its messages are lost.
   */
  dropSubscriptionMessages(): void;
  /** Bytes dropped so far by {@link TcpProxy.dropSubscriptionMessages}. */
  readonly dropped: number;
  close(): Promise<void>;
}

/** Starts a proxy to `127.0.0.1:<targetPort>`. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let cut = false;
  let dropping = false;
  let dropped = 0;
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    if (cut) socket.pause();
  };
  const server: Server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    track(client);
    track(upstream);
    let subscriber = false;
    // By hand rather than pipe(): pipe() resumes a paused source when the destination drains.
    client.on('data', (chunk: Buffer) => {
      if (/subscribe/i.test(chunk.toString('latin1'))) subscriber = true;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (dropping && subscriber) dropped += chunk.length;
      else client.write(chunk);
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    cut() {
      cut = true;
      for (const socket of sockets) socket.pause();
    },
    heal() {
      cut = false;
      for (const socket of sockets) socket.resume();
    },
    dropSubscriptionMessages() {
      dropping = true;
    },
    get dropped() {
      return dropped;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
