import { describe, expect, it } from 'vitest';
import { LineSplitter, TokenBucket } from './output.js';

const texts = (lines: Array<{ text: string; cut: boolean }>): string[] =>
  lines.map((l) => (l.cut ? `${l.text}<cut>` : l.text));

describe('LineSplitter', () => {
  it('joins a line written in pieces and splits a chunk holding several', () => {
    const splitter = new LineSplitter(16);
    expect(texts(splitter.push(Buffer.from('ab')).lines)).toEqual([]);
    expect(texts(splitter.push(Buffer.from('c\nde\nf')).lines)).toEqual(['abc', 'de']);
    expect(texts(splitter.end())).toEqual(['f']);
  });

  it('cuts a line at the limit as soon as it is reached, and skips the rest of it without holding it', () => {
    const splitter = new LineSplitter(4);
    expect(texts(splitter.push(Buffer.from('abcdefgh')).lines)).toEqual(['abcd<cut>']);
    // 10 MB more of the same line: nothing comes out, nothing is kept.
    for (let i = 0; i < 10; i++) expect(splitter.push(Buffer.alloc(1_048_576, 'x')).lines).toEqual([]);
    expect(texts(splitter.push(Buffer.from('yz\nok\n')).lines)).toEqual(['ok']);
    expect(splitter.end()).toEqual([]);
  });

  it('a line of exactly the limit is whole, even when its newline comes in the next chunk', () => {
    const splitter = new LineSplitter(4);
    expect(splitter.push(Buffer.from('abcd')).lines).toEqual([]);
    expect(texts(splitter.push(Buffer.from('\n')).lines)).toEqual(['abcd']);
  });

  it('a line admit refuses is dropped and counted (newline included), without being made into a string', () => {
    const splitter = new LineSplitter(8);
    let budget = 4;
    const admit = (bytes: number): boolean => (bytes <= budget ? ((budget -= bytes), true) : false);
    expect(splitter.push(Buffer.from('abc\nlonger\nxyz\n'), admit)).toEqual({
      lines: [{ text: 'abc', cut: false }],
      dropped: 7 + 4,
    });
  });
});

describe('TokenBucket', () => {
  it('lets a burst through at once, then the rate', () => {
    const bucket = new TokenBucket(1000, 5000, 0);
    expect(bucket.take(5000, 0)).toBe(true);
    expect(bucket.take(1, 0)).toBe(false);
    expect(bucket.take(501, 500)).toBe(false);
    expect(bucket.take(500, 500)).toBe(true);
    // Never more than the burst, however long it was quiet.
    expect(bucket.take(5001, 60_500)).toBe(false);
    expect(bucket.take(5000, 60_500)).toBe(true);
  });

  it('spend goes into debt and says how long until it is paid off', () => {
    const bucket = new TokenBucket(1000, 1000, 0);
    expect(bucket.spend(1000, 0)).toBe(0);
    expect(bucket.spend(2000, 0)).toBe(2000);
    expect(bucket.spend(0, 2000)).toBe(0);
  });
});
