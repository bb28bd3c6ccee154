import { describe, expect, it } from 'vitest';
import { CHANNEL, FRAME_MAX_BYTES, FrameDecoder, frame, readSize, type Frame } from './exec-frames.js';
import { readTicket, ticketKey, ticketLine } from './proxy-ticket.js';

/** The frames `decoder` gives for `chunks` written one after another. */
async function decode(chunks: Buffer[]): Promise<Frame[]> {
  const decoder = new FrameDecoder();
  const frames: Frame[] = [];
  decoder.on('data', (f: Frame) => frames.push(f));
  const ended = new Promise((resolve, reject) => decoder.once('end', resolve).once('error', reject));
  for (const chunk of chunks) decoder.write(chunk);
  decoder.end();
  await ended;
  return frames;
}

describe('exec frames: a channel byte, a length, the payload', () => {
  it('decodes frames split anywhere and frames sharing a chunk', async () => {
    const bytes = Buffer.concat([
      frame(CHANNEL.stdout, 'hello'),
      frame(CHANNEL.close, Buffer.from([0])),
      frame(CHANNEL.stderr),
    ]);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const frames = await decode([bytes.subarray(0, cut), bytes.subarray(cut)]);
      expect(frames.map((f) => [f.channel, f.payload.toString('latin1')])).toEqual([
        [1, 'hello'],
        [255, '\0'],
        [2, ''],
      ]);
    }
  });

  it('sends a payload given in pieces as one frame', async () => {
    const pieces = [Buffer.from('ab'), Buffer.alloc(0), Buffer.from('cde')];
    expect(frame(CHANNEL.stdout, pieces)).toEqual(frame(CHANNEL.stdout, 'abcde'));
    const frames = await decode([frame(CHANNEL.stderr, pieces)]);
    expect(frames.map((f) => [f.channel, f.payload.toString('latin1')])).toEqual([[2, 'abcde']]);
  });

  it('refuses a frame over the largest payload, and a stream that ends inside a frame', async () => {
    const head = Buffer.from([1, 0, 0, 0, 0]);
    head.writeUInt32BE(FRAME_MAX_BYTES + 1, 1);
    await expect(decode([head])).rejects.toThrow(/a frame of \d+ bytes/);
    await expect(decode([frame(1, 'abc').subarray(0, 6)])).rejects.toThrow('the connection ended inside a frame');
  });
});

describe('exec tickets', () => {
  const key = ticketKey('s'.repeat(32));
  it('a ticket may name exec instead of a port; its signature covers it', () => {
    const line = ticketLine(key, { sessionId: 'abc-1', port: 'exec', expiresAt: Date.now() + 1000 }).trimEnd();
    expect(readTicket(key, line)).toMatchObject({ sessionId: 'abc-1', port: 'exec' });
    // The same signature does not open a port instead.
    expect(readTicket(key, line.replace(' exec ', ' 8080 '))).toBeUndefined();
    expect(readTicket(key, line.replace(' exec ', ' shell '))).toBeUndefined();
  });
});

describe('resize frames', () => {
  it('read a size of 1 to 1000 columns and rows, and nothing else', () => {
    expect(readSize(Buffer.from('{"Width": 120, "Height": 40}'))).toEqual({ cols: 120, rows: 40 });
    for (const bad of [
      '{"Width": 0, "Height": 40}',
      '{"Width": 1001, "Height": 1}',
      '{"Width": 1.5, "Height": 2}',
      'null',
      'x',
      '{}',
    ])
      expect(readSize(Buffer.from(bad)), bad).toBeUndefined();
  });
});
