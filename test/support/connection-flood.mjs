// A client that holds as many connections to a server as it can: `node connection-flood.mjs <port> <count> <holdMs>`.
// Half the sockets send nothing; the other half ask for every event without a key (GET /v1/events), as
// a keyless flood would. Whenever the server closes one, it opens another, until holdMs has passed; then
// it prints one JSON line {opened, refused, maxOpenAtOnce} and closes every socket at once (the release).
import { connect } from 'node:net';

const [port, count, holdMs] = process.argv.slice(2).map(Number);
const open = new Set();
let opened = 0;
let refused = 0;
let maxOpenAtOnce = 0;
let holding = true;

function one(i) {
  const socket = connect(port, '127.0.0.1');
  socket.on('connect', () => {
    opened++;
    open.add(socket);
    maxOpenAtOnce = Math.max(maxOpenAtOnce, open.size);
    if (i % 2 === 1) socket.write('GET /v1/events HTTP/1.1\r\nHost: flood\r\nAccept: text/event-stream\r\n\r\n');
  });
  socket.on('data', () => {});
  socket.on('error', () => refused++);
  socket.on('close', () => {
    open.delete(socket);
    // Opened again a moment later: a flood that keeps the server at its bound.
    if (holding) setTimeout(() => one(i), 5);
  });
}

for (let i = 0; i < count; i++) one(i);
setTimeout(() => {
  holding = false;
  process.stdout.write(`${JSON.stringify({ opened, refused, maxOpenAtOnce, openAtRelease: open.size })}\n`);
  for (const socket of open) socket.destroy();
  process.exit(0);
}, holdMs);
