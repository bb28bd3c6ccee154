import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readFirstLine, readUntil } from './proxy-ticket.js';

describe('readUntil: the bytes up to a delimiter, the rest left for the next reader', () => {
  it('finds a delimiter split over chunks, and leaves the bytes after it in the stream', async () => {
    const socket = new PassThrough();
    const head = readUntil(socket, '\r\n\r\n', 100, 1000, 'answer head');
    socket.write('HTTP/1.1 101 Switching\r\n\r');
    socket.write('\nafter');
    expect((await head).toString()).toBe('HTTP/1.1 101 Switching\r\n\r\n');
    expect(socket.isPaused()).toBe(true);
    expect(socket.read()?.toString()).toBe('after');
  });

  it('answers a first line without its newline', async () => {
    const socket = new PassThrough();
    const line = readFirstLine(socket, 100, 1000);
    socket.write('CQP1 OK\nbytes');
    expect(await line).toBe('CQP1 OK');
    expect(socket.read()?.toString()).toBe('bytes');
  });

  it('refuses more bytes than allowed without the delimiter, or with it too far', async () => {
    const socket = new PassThrough();
    const head = readUntil(socket, '\n', 8, 1000, 'first line');
    socket.write('0123456789');
    await expect(head).rejects.toThrow('no first line within 8 bytes');
    const far = new PassThrough();
    const line = readUntil(far, '\n', 8, 1000, 'first line');
    far.write('0123456789\n');
    await expect(line).rejects.toThrow('no first line within 8 bytes');
  });

  it('refuses a stream that ends first, and one that sends nothing in time', async () => {
    const ended = new PassThrough();
    const head = readUntil(ended, '\r\n\r\n', 100, 1000, 'answer head');
    ended.end('HTTP/1.1 200 OK\r\n');
    await expect(head).rejects.toThrow('the connection ended before its answer head');
    const silent = new PassThrough();
    await expect(readUntil(silent, '\n', 100, 50, 'first line')).rejects.toThrow('no first line within 50 ms');
  });
});
