#!/usr/bin/env node
// A hostile session for the isolation tests: it tries to reach what is not its own and writes what it got
// to the observer (argv[2], a FIFO the test reads through its log), one line per attempt:
//   "<USER_ID> <FENCE> <epoch ms> <pid> result <name> <outcome>"
// and heartbeats "<USER_ID> <FENCE> <epoch ms> <pid> main" every 50 ms. SESSION_METADATA:
//   tcp: {name: "host:port"} to connect to (outcome: "connected <first reply bytes>" or the error code);
//   redis: "host:port" to send PING to; neighbourDir: another session's SESSION_DIR;
//   writes: {name: path} files to create; reads: {name: path} files to read; fill: fill /tmp and /dev/shm.
// It listens on 127.0.0.1:8080 itself, answering its USER_ID.
import { appendFileSync, readdirSync, readFileSync, writeFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { sep } from 'node:path';

const observer = process.argv[2];
const metadata = JSON.parse(process.env.SESSION_METADATA ?? '{}');
const who = `${process.env.USER_ID} ${process.env.FENCE}`;
const say = (text) => appendFileSync(observer, `${who} ${Date.now()} ${process.pid} ${text}\n`);
const result = (name, outcome) => say(`result ${name} ${encodeURIComponent(String(outcome).slice(0, 200))}`);
const codeOf = (err) => err.code ?? err.message;

setInterval(() => say('main'), 50);
say('main');

/** Connects to host:port, sends `send`, answers "connected <reply>" or the error code. */
function tryTcp(target, send) {
  const at = target.lastIndexOf(':');
  return new Promise((resolve) => {
    const socket = connect({ host: target.slice(0, at), port: Number(target.slice(at + 1)) });
    let reply = '';
    const done = (outcome) => {
      socket.destroy();
      clearTimeout(timer);
      resolve(outcome);
    };
    const timer = setTimeout(() => done(reply === '' ? 'timeout' : `connected ${reply}`), 2000);
    socket.on('connect', () => {
      if (send !== undefined) socket.write(send);
    });
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\n')) done(`connected ${reply.trim()}`);
    });
    socket.on('end', () => done(`connected ${reply.trim()}`));
    socket.on('error', (err) => done(codeOf(err)));
  });
}

/** Fills `dir` with 1 MiB writes until one fails: "<MiB written> <error code>". */
function fill(dir) {
  const chunk = Buffer.alloc(1024 * 1024, 7);
  const fd = openSync(`${dir}/fill`, 'w');
  let written = 0;
  try {
    for (;;) {
      writeSync(fd, chunk);
      written++;
    }
  } catch (err) {
    return `${written} ${codeOf(err)}`;
  } finally {
    closeSync(fd);
  }
}

const tryWrite = (path) => {
  try {
    writeFileSync(path, who);
    return 'written';
  } catch (err) {
    return codeOf(err);
  }
};
const tryRead = (path) => {
  try {
    return `read ${readFileSync(path, 'utf8')}`;
  } catch (err) {
    return codeOf(err);
  }
};

const server = createServer((socket) => socket.end(`${process.env.USER_ID}\n`));
server.on('error', (err) => result('listen8080', codeOf(err)));
server.listen(8080, '127.0.0.1', async () => {
  result('listen8080', 'listening');
  result('cwd', process.cwd() === process.env.SESSION_DIR ? 'SESSION_DIR' : process.cwd());
  result('home', process.env.HOME === process.env.SESSION_DIR ? 'SESSION_DIR' : process.env.HOME);
  // What /tmp holds besides the way down to SESSION_DIR (which may lie under it).
  const own = (process.env.SESSION_DIR ?? '').split(sep);
  const others = readdirSync('/tmp').filter((entry) => !(own[1] === 'tmp' && own[2] === entry));
  result('tmpAtStart', others.length === 0 ? 'empty' : others.join(','));
  result('shmAtStart', readdirSync('/dev/shm').length === 0 ? 'empty' : readdirSync('/dev/shm').join(','));
  result('ownTmp', tryWrite('/tmp/secret'));
  result('ownDir', tryWrite(`${process.env.SESSION_DIR}/secret`));
  result('self8080', await tryTcp('127.0.0.1:8080'));
  for (const [name, target] of Object.entries(metadata.tcp ?? {})) result(`tcp-${name}`, await tryTcp(target));
  if (metadata.redis !== undefined) result('redis', await tryTcp(metadata.redis, '*1\r\n$4\r\nPING\r\n'));
  for (const [name, path] of Object.entries(metadata.writes ?? {})) result(`write-${name}`, tryWrite(path));
  for (const [name, path] of Object.entries(metadata.reads ?? {})) result(`read-${name}`, tryRead(path));
  if (metadata.neighbourDir !== undefined) {
    result('neighbourDirRead', tryRead(`${metadata.neighbourDir}/secret`));
    result('neighbourDirWrite', tryWrite(`${metadata.neighbourDir}/intruder`));
  }
  result('tmpSecretAfter', tryRead('/tmp/secret'));
  if (metadata.fill === true) {
    result('fillTmp', fill('/tmp'));
    result('fillShm', fill('/dev/shm'));
  }
  result('done', 'yes');
  // Goes on using its own /tmp, so that the test sees it still can after a neighbour filled its own.
  setInterval(() => result('tmpWrite', tryWrite(`/tmp/tick-${Date.now() % 10}`)), 200);
});
