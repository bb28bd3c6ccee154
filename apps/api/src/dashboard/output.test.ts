import { describe, expect, it } from 'vitest';
import { OutputTailCollector, type OutputLine } from './output.js';

const lines = (from: number, to: number): OutputLine[] =>
  Array.from({ length: to - from }, (_, i) => ({
    id: String(from + i),
    at: new Date(1_700_000_000_000 + from + i).toISOString(),
    stream: (from + i) % 2 === 0 ? 'stdout' : 'stderr',
    line: `line ${from + i}`,
  }));

describe('the tail of a session output', () => {
  it('keeps the newest lines of every page, in order, and counts those left out', () => {
    const tail = new OutputTailCollector(100, undefined);
    expect(tail.next).toBeUndefined();
    tail.add({ lines: lines(0, 1000), droppedBytes: 0, more: true });
    expect(tail.next).toBe('999');
    expect(tail.more).toBe(true);
    tail.add({ lines: lines(1000, 1040), droppedBytes: 4096, more: false });
    expect(tail.result()).toEqual({
      lines: lines(940, 1040),
      skipped: 940,
      droppedBytes: 4096,
      next: '1039',
      more: false,
    });
  });

  it('with nothing new, goes on from where it was asked to', () => {
    const tail = new OutputTailCollector(100, '41');
    tail.add({ lines: [], droppedBytes: 0, more: false });
    expect(tail.result()).toEqual({ lines: [], skipped: 0, droppedBytes: 0, next: '41', more: false });
  });

  it('a page without lines ends the reading even if it says more (asking again would read it again)', () => {
    const tail = new OutputTailCollector(10, '5');
    tail.add({ lines: [], droppedBytes: 0, more: true });
    expect(tail.more).toBe(false);
  });

  it('fewer lines than the tail are all kept', () => {
    const tail = new OutputTailCollector(100, undefined);
    tail.add({ lines: lines(0, 3), droppedBytes: 0, more: false });
    expect(tail.result().lines.map((l) => l.line)).toEqual(['line 0', 'line 1', 'line 2']);
  });
});
