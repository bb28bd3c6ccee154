// The output reader on a clock of the test's own: every call is given its instant.
import { describe, expect, it } from 'vitest';
import { OutputReader } from './output-reader.js';

const lines = (n: number, bytes: number): Buffer => Buffer.from(`${'x'.repeat(bytes - 1)}\n`.repeat(n));

describe('OutputReader', () => {
  it('lets the burst through, drops the rest of the flood and marks it at once, after the lines that passed', () => {
    const reader = new OutputReader('s', 1000, 0);
    // 1 MiB of burst: 1,024 lines of 1 KiB pass, 76 are dropped.
    const messages = reader.push('stdout', lines(1100, 1024), 0);
    expect(messages).toHaveLength(2);
    expect(messages[0]!.lines).toHaveLength(1024);
    expect(messages[1]).toEqual({
      t: 'out',
      id: 's',
      stream: 'stdout',
      lines: [`[output dropped: ${76 * 1024} bytes]`],
      dropped: 76 * 1024,
    });
    expect(reader.markDueAt).toBeUndefined();
  });

  it('marks at most once a second: a drop within the second is due when it is up, on the stream that dropped first', () => {
    const reader = new OutputReader('s', 1000, 0);
    reader.push('stdout', lines(1100, 1024), 0);
    expect(reader.push('stderr', lines(3, 1024), 400)).toEqual([]);
    expect(reader.push('stdout', lines(2, 1024), 500)).toEqual([]);
    expect(reader.markDueAt).toBe(1000);
    expect(reader.tick(999)).toEqual([]);
    expect(reader.tick(1000)).toEqual([
      { t: 'out', id: 's', stream: 'stderr', lines: [`[output dropped: ${5 * 1024} bytes]`], dropped: 5 * 1024 },
    ]);
    expect(reader.markDueAt).toBeUndefined();
  });

  it('a line that comes once the mark is due carries it, before the line, in one message', () => {
    const reader = new OutputReader('s', 100, 0);
    reader.push('stdout', lines(1025, 1024), 0);
    reader.push('stdout', lines(1, 1024), 10);
    // 1.5 s later the bucket holds 150 bytes: a line of 100 passes, with the mark of the drop before it.
    expect(reader.push('stdout', lines(1, 100), 1500)).toEqual([
      { t: 'out', id: 's', stream: 'stdout', lines: ['[output dropped: 1024 bytes]', 'x'.repeat(99)], dropped: 1024 },
    ]);
  });

  it('drops every line while the host does not read, and counts it', () => {
    const reader = new OutputReader('s', 1_000_000, 0);
    expect(reader.push('stdout', lines(3, 10), 0, false)).toEqual([
      { t: 'out', id: 's', stream: 'stdout', lines: ['[output dropped: 30 bytes]'], dropped: 30 },
    ]);
  });

  it('cuts a line over 16 KiB, passes what is left at the end as a line, and marks what is unmarked at the finish', () => {
    const reader = new OutputReader('s', 1_000_000, 0);
    expect(reader.push('stderr', Buffer.from('y'.repeat(20_000)), 0)).toEqual([
      { t: 'out', id: 's', stream: 'stderr', lines: [`${'y'.repeat(16_384)} [line cut]`] },
    ]);
    expect(reader.push('stdout', Buffer.from('no newline'), 1)).toEqual([]);
    expect(reader.end('stdout', 2)).toEqual([{ t: 'out', id: 's', stream: 'stdout', lines: ['no newline'] }]);
    reader.push('stdout', lines(1, 10), 3, false);
    reader.push('stdout', lines(1, 10), 4, false);
    expect(reader.finish(5)).toEqual([
      { t: 'out', id: 's', stream: 'stdout', lines: ['[output dropped: 10 bytes]'], dropped: 10 },
    ]);
    expect(reader.finish(6)).toEqual([]);
  });
});
