// The notify-fd reader on a clock of the test's own: every call is given its instant.
import { describe, expect, it } from 'vitest';
import { NotifyReader } from './notify-reader.js';

const chunk = (text: string): Buffer => Buffer.from(text);

describe('NotifyReader', () => {
  it('activity: the first reported at once, then at most one report per 100 ms naming the latest instant', () => {
    const reader = new NotifyReader('s', 0);
    expect(reader.push(chunk('{"active": true}\n'), 1000).messages).toEqual([{ t: 'active', id: 's', at: 1000 }]);
    expect(reader.reportDueAt).toBeUndefined();
    for (const at of [1010, 1040, 1060]) expect(reader.push(chunk('{"active":true}\n'), at).messages).toEqual([]);
    expect(reader.reportDueAt).toBe(1100);
    expect(reader.tick(1099)).toEqual([]);
    expect(reader.tick(1100)).toEqual([{ t: 'active', id: 's', at: 1060 }]);
    expect(reader.reportDueAt).toBeUndefined();
    // The next slot counts from that report.
    expect(reader.push(chunk('{"active":true}\n'), 1150).messages).toEqual([]);
    expect(reader.reportDueAt).toBe(1200);
  });

  it('readiness is activity, and is announced again only when the endpoint changes', () => {
    const reader = new NotifyReader('s', 0);
    expect(reader.push(chunk('{"ready": true, "endpoint": "http://x:1"}\n'), 0).messages).toEqual([
      { t: 'active', id: 's', at: 0 },
      { t: 'ready', id: 's', endpoint: 'http://x:1' },
    ]);
    expect(reader.push(chunk('{"ready": true, "endpoint": "http://x:1"}\n'), 500).messages).toEqual([
      { t: 'active', id: 's', at: 500 },
    ]);
    expect(reader.push(chunk('{"ready": true}\n'), 1000).messages).toEqual([
      { t: 'active', id: 's', at: 1000 },
      { t: 'ready', id: 's' },
    ]);
  });

  it('reports the first five bad lines (not JSON, other objects, bad endpoints, overlong lines), counts the rest, and reads a last line without newline', () => {
    const reader = new NotifyReader('s', 0);
    const bad = [
      'nope',
      '{"active": false}',
      '{"ready": true, "endpoint": ""}',
      `{"ready": true, "endpoint": "${'e'.repeat(513)}"}`,
      'z'.repeat(2000),
      '{"busy": 1}',
    ];
    const { messages } = reader.push(chunk(`${bad.join('\n')}\n\n`), 0);
    expect(messages.map((m) => (m.t === 'notify_bad' ? [m.count, m.reason] : m))).toEqual([
      [1, 'not JSON'],
      [2, 'not {"ready": true, ...} or {"active": true}'],
      [3, 'endpoint must be a string of 1 to 512 characters'],
      [4, 'endpoint must be a string of 1 to 512 characters'],
      [5, 'a line longer than 1024 characters'],
    ]);
    expect(reader.push(chunk('{"ready": true}'), 1).messages).toEqual([]);
    expect(reader.end(2)).toEqual([
      { t: 'active', id: 's', at: 2 },
      { t: 'ready', id: 's' },
    ]);
  });

  it('reads at most 1000 lines a second: past that, it says until when to read no more', () => {
    const reader = new NotifyReader('s', 0);
    expect(reader.push(chunk('\n'.repeat(1000)), 0).pauseUntil).toBeUndefined();
    expect(reader.push(chunk('\n'.repeat(500)), 100).pauseUntil).toBe(100 + 400);
  });
});
