// A session serving HTTP and WebSocket for the session proxy's tests, on 127.0.0.1 of its own network,
// port SESSION_METADATA's `port`, else $PROXY_PORT, else 8080. It announces readiness with that port on
// SESSION_NOTIFY_FD.
//   GET /             a page whose script fetches /echo and opens a WebSocket to /ws, then writes what it
//                     saw into document.title ("fetch ok; ws ok")
//   ANY /echo         JSON of the request as received: method, url, headers
//   GET /bytes?n=N    N bytes (streamed, 64 KiB at a time, honouring backpressure)
//   PUT|POST /count   the body's length in bytes, counted as it streams
//   GET /sse          an event every 50 ms: "data: <n>", flushed at once
//   GET /slow         headers, then nothing for ever (a reader that waits)
//   GET /step         server-sent events, one at a time: the first at once, each next one only after a
//                     POST /next (a proxy that held events back would leave the reader waiting for ever)
//   GET /ws-count     how many WebSockets are open on it now
//   GET /sent         bytes /bytes answers have handed to the kernel so far
//   GET /seen         the method and path of every request it received, in order
//   GET /unavailable  503 with Retry-After: 1 (the session's own refusal)
//   WS  /ws           echoes every message (text or binary)
// Node's own modules only: the session sees the host read-only and nothing of the checkout's packages.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { writeSync } from 'node:fs';

const port = Number(JSON.parse(process.env.SESSION_METADATA || '{}').port ?? process.env.PROXY_PORT ?? 8080);
const steppers = new Set();
let step = 0;
let webSockets = 0;
let sent = 0;
const seen = [];

const page = `<!doctype html><html><head><title>loading</title></head><body><p id="out">loading</p>
<script src="/app.js"></script></body></html>`;
const script = `(async () => {
  const seen = [];
  try { const r = await fetch('/echo'); const j = await r.json(); seen.push(j.url === '/echo' ? 'fetch ok' : 'fetch bad'); }
  catch (e) { seen.push('fetch failed ' + e); }
  try {
    const got = await new Promise((resolve, reject) => {
      const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
      ws.onopen = () => ws.send('ping');
      ws.onmessage = (m) => { resolve(m.data); ws.close(); };
      ws.onerror = () => reject(new Error('ws error'));
    });
    seen.push(got === 'ping' ? 'ws ok' : 'ws bad');
  } catch (e) { seen.push('ws failed'); }
  document.title = seen.join('; ');
  document.getElementById('out').textContent = document.title;
})();`;

const server = createServer((req, res) => {
  const url = new URL(req.url, 'http://session');
  if (url.pathname !== '/seen') seen.push(`${req.method} ${req.url}`);
  if (url.pathname === '/') {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(page);
  } else if (url.pathname === '/app.js') {
    res.writeHead(200, { 'content-type': 'text/javascript' });
    res.end(script);
  } else if (url.pathname === '/echo') {
    let body = 0;
    req.on('data', (c) => (body += c.length));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
    });
  } else if (url.pathname === '/bytes') {
    let left = Number(url.searchParams.get('n') ?? 0);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(left) });
    const chunk = Buffer.alloc(65536, 120);
    const write = () => {
      while (left > 0) {
        const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
        left -= part.length;
        sent += part.length;
        if (!res.write(part)) {
          res.once('drain', write);
          return;
        }
      }
      res.end();
    };
    write();
  } else if (url.pathname === '/count') {
    let n = 0;
    req.on('data', (c) => (n += c.length));
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ bytes: n }));
    });
  } else if (url.pathname === '/sse') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
    let n = 0;
    const timer = setInterval(() => res.write(`data: ${n++} ${Date.now()}\n\n`), 50);
    res.on('close', () => clearInterval(timer));
  } else if (url.pathname === '/step') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
    res.write(`data: ${step}\n\n`);
    steppers.add(res);
    res.on('close', () => steppers.delete(res));
  } else if (url.pathname === '/next') {
    step++;
    for (const reader of steppers) reader.write(`data: ${step}\n\n`);
    res.writeHead(204);
    res.end();
  } else if (url.pathname === '/unavailable') {
    res.writeHead(503, { 'retry-after': '1', 'content-type': 'text/plain' });
    res.end('busy');
  } else if (url.pathname === '/seen') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ seen }));
  } else if (url.pathname === '/sent') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ sent }));
  } else if (url.pathname === '/ws-count') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ open: webSockets }));
  } else if (url.pathname === '/slow') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('waiting\n');
  } else {
    res.writeHead(404);
    res.end('not here');
  }
});

// A minimal WebSocket echo (RFC 6455): unmask each client frame, send it back unmasked.
server.on('upgrade', (req, socket) => {
  if (req.url !== '/ws' || req.headers['upgrade']?.toLowerCase() !== 'websocket') {
    socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    return;
  }
  const accept = createHash('sha1')
    .update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
    .digest('base64');
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
  );
  socket.setNoDelay(true);
  webSockets++;
  socket.once('close', () => webSockets--);
  // A connection cut without a close frame ends the WebSocket (as the ws package does).
  socket.once('end', () => socket.destroy());
  let buffered = Buffer.alloc(0);
  socket.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (;;) {
      if (buffered.length < 2) return;
      const opcode = buffered[0] & 0x0f;
      let length = buffered[1] & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (buffered.length < 4) return;
        length = buffered.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (buffered.length < 10) return;
        length = Number(buffered.readBigUInt64BE(2));
        offset = 10;
      }
      const masked = (buffered[1] & 0x80) !== 0;
      const frameEnd = offset + (masked ? 4 : 0) + length;
      if (buffered.length < frameEnd) return;
      const payload = Buffer.from(buffered.subarray(offset + (masked ? 4 : 0), frameEnd));
      if (masked) {
        const mask = buffered.subarray(offset, offset + 4);
        for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
      }
      buffered = buffered.subarray(frameEnd);
      if (opcode === 0x8) {
        // The close frame back, with the client's status code.
        socket.end(Buffer.concat([Buffer.from([0x88, payload.length]), payload]));
        return;
      }
      if (opcode === 0x9) continue;
      const head =
        payload.length < 126
          ? Buffer.from([0x80 | opcode, payload.length])
          : payload.length < 65536
            ? Buffer.from([0x80 | opcode, 126, payload.length >> 8, payload.length & 0xff])
            : Buffer.concat([
                Buffer.from([0x80 | opcode, 127]),
                (() => {
                  const b = Buffer.alloc(8);
                  b.writeBigUInt64BE(BigInt(payload.length));
                  return b;
                })(),
              ]);
      socket.write(Buffer.concat([head, payload]));
    }
  });
  socket.on('error', () => {});
});

server.listen(port, '127.0.0.1', () => {
  if (process.env.SESSION_NOTIFY_FD !== undefined)
    writeSync(
      Number(process.env.SESSION_NOTIFY_FD),
      `${JSON.stringify({ ready: true, endpoint: `127.0.0.1:${port}`, port })}\n`,
    );
});
process.on('SIGTERM', () => process.exit(0));
