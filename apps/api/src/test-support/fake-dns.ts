import { createSocket } from 'node:dgram';
import { isIPv4, isIPv6 } from 'node:net';
import { cleanUp } from '@cq/test-harness';

/** A DNS server on 127.0.0.1 (UDP, random port) for the c-ares resolver's `servers`. */
export interface FakeDns {
  /** `127.0.0.1:<port>`, as `Resolver.setServers` takes it. */
  readonly server: string;
  /** The name of every query that reached it, in order. */
  readonly asked: string[];
}

/**
 * Starts a DNS server that answers A and AAAA queries from `answers` (a name not in it: NXDOMAIN; a
 * family it lacks: no data), or, with `answers` undefined, never answers at all: a DNS that hangs.
 * Closed after the file's tests.
 */
export async function fakeDns(answers?: Record<string, readonly string[]>): Promise<FakeDns> {
  const socket = createSocket('udp4');
  const asked: string[] = [];
  socket.on('message', (query, peer) => {
    const question = parseQuestion(query);
    if (question === undefined) return;
    asked.push(question.name);
    if (answers === undefined) return;
    const known = answers[question.name.toLowerCase()];
    const addresses = (known ?? []).filter((a) =>
      question.type === 1 ? isIPv4(a) : question.type === 28 && isIPv6(a),
    );
    socket.send(
      reply(query, question.end, known === undefined ? 3 : 0, question.type, addresses),
      peer.port,
      peer.address,
    );
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  cleanUp(() => new Promise<void>((resolve) => socket.close(() => resolve())));
  return { server: `127.0.0.1:${socket.address().port}`, asked };
}

/** The first question of a query: its name, type, and where it ends. */
function parseQuestion(query: Buffer): { name: string; type: number; end: number } | undefined {
  const labels: string[] = [];
  let at = 12;
  while (at < query.length) {
    const length = query[at]!;
    if (length === 0) break;
    labels.push(query.subarray(at + 1, at + 1 + length).toString('ascii'));
    at += 1 + length;
  }
  if (at + 5 > query.length) return undefined;
  return { name: labels.join('.'), type: query.readUInt16BE(at + 1), end: at + 5 };
}

/** A response to `query`: its id and question, `rcode`, and one record of `type` per address (TTL 60). */
function reply(query: Buffer, questionEnd: number, rcode: number, type: number, addresses: readonly string[]): Buffer {
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2); // id
  header.writeUInt16BE(0x8180 | rcode, 2); // response, recursion desired and available
  header.writeUInt16BE(1, 4); // one question
  header.writeUInt16BE(addresses.length, 6);
  const records = addresses.map((address) => {
    const data = type === 1 ? Buffer.from(address.split('.').map(Number)) : ipv6Bytes(address);
    const record = Buffer.alloc(12);
    record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
    record.writeUInt16BE(type, 2);
    record.writeUInt16BE(1, 4); // IN
    record.writeUInt32BE(60, 6);
    record.writeUInt16BE(data.length, 10);
    return Buffer.concat([record, data]);
  });
  return Buffer.concat([header, query.subarray(12, questionEnd), ...records]);
}

function ipv6Bytes(address: string): Buffer {
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  const bytes = Buffer.alloc(16);
  groups.forEach((group, i) => bytes.writeUInt16BE(Number.parseInt(group, 16), i * 2));
  return bytes;
}
