// Child process of the events benchmark: two minimal ways to carry Redis events to SSE readers, over
// real HTTP in a process of their own, to set beside the API's event stream.
// - `publish` (the limit): one subscription to a channel; each message is written to every reader as it
//   comes (no ordering across masters, no replay, no ids).
// - `xread` (what many write first): each reader runs its own XREAD BLOCK loop on a stream, on a
//   connection of its own, so Redis does one read per reader per batch.
// RELAY_MODE picks one. Prints one JSON line {"url"} once it listens.
import { createServer, type ServerResponse } from 'node:http';
import { Redis } from 'ioredis';

const mode = process.env['RELAY_MODE'];
const redisUrl = process.env['REDIS_URL']!;
const CHANNEL = 'bench:relay:events';
const STREAM = 'bench:relay:stream';
const readers = new Set<ServerResponse>();

if (mode === 'publish') {
  const subscriber = new Redis(redisUrl);
  await subscriber.subscribe(CHANNEL);
  subscriber.on('message', (_channel: string, message: string) => {
    const line = `data: ${message}\n\n`;
    for (const reader of readers) reader.write(line);
  });
}

const server = createServer((request, response) => {
  void (async () => {
    if (mode === 'publish') {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      response.flushHeaders();
      readers.add(response);
      request.once('close', () => readers.delete(response));
      return;
    }
    const connection = new Redis(redisUrl);
    let last = (await connection.xrevrange(STREAM, '+', '-', 'COUNT', 1))[0]?.[0] ?? '0-0';
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    response.flushHeaders();
    let open = true;
    request.once('close', () => {
      open = false;
      connection.disconnect();
    });
    while (open) {
      const reply = await connection.xread('COUNT', 100, 'BLOCK', 0, 'STREAMS', STREAM, last).catch(() => null);
      if (reply === null) continue;
      for (const [, entries] of reply)
        for (const [id, fields] of entries) {
          last = id;
          response.write(`id: ${id}\ndata: ${fields[1]}\n\n`);
        }
    }
  })();
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
