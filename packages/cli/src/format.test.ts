import { ApiError, NoCapacityError, SessionExistsError, ThrottledError, UnavailableError } from '@cq/client';
import type { ClientErrorCode } from '@cq/client';
import { describe, expect, it } from 'vitest';
import { exitCodeOf, exitCodes } from './exit-codes.js';
import { describeError, duration, eventWords, isolationWords, sessionOpening, stateWords, table } from './format.js';

describe('cli formatting', () => {
  it('says throttled with the retry time in whole seconds, rounded up', () => {
    expect(describeError(new ThrottledError(429, 'throttled', 'x', undefined, 6001))).toBe('throttled: retry in 7 s');
    expect(describeError(new ThrottledError(429, 'throttled', 'x', undefined, 10))).toBe('throttled: retry in 1 s');
    expect(describeError(new SessionExistsError(409, 'session_exists', 'x', undefined, 'abc'))).toBe(
      'session_exists: the user already has session abc',
    );
  });

  it('no_capacity keeps the pool the API named, and tells a pool no host serves from a full one', () => {
    const refusal = (reason?: 'pool_full' | 'pool_unserved', pool?: string) =>
      describeError(
        new NoCapacityError(
          503,
          'no_capacity',
          'x',
          undefined,
          reason === 'pool_unserved' ? 10_000 : 1000,
          pool,
          reason,
        ),
      );
    expect(refusal('pool_full', 'gpu')).toBe(
      'no_capacity: no worker slot of pool gpu is free; the token stays valid, retry in 1 s',
    );
    expect(refusal('pool_unserved', 'tpu')).toBe(
      'no_capacity: no live worker host takes sessions of pool tpu (a mistyped pool? cq pools lists the pools hosts serve); ' +
        'the token stays valid, retry in 10 s',
    );
    // An API that names neither.
    expect(refusal()).toBe(
      'no_capacity: no worker slot of pool the token names is free; the token stays valid, retry in 1 s',
    );
  });

  it('maps error answers to exit codes', () => {
    expect(exitCodeOf(new ThrottledError(429, 'throttled', 'x', undefined, 1))).toBe(exitCodes.throttled);
    expect(exitCodeOf(new UnavailableError(0, 'unreachable', 'x', undefined))).toBe(exitCodes.unavailable);
    expect(exitCodeOf(new Error('boom'))).toBe(exitCodes.failure);
  });

  it('words each live state alike whether it comes from a session (state, ready) or from an event type', () => {
    expect([eventWords('pending'), eventWords('running'), eventWords('ready'), eventWords('stopping')]).toEqual([
      stateWords('pending', false),
      stateWords('running', false),
      stateWords('running', true),
      stateWords('stopping', false),
    ]);
    expect(stateWords('running', true)).toBe('running (ready)');
    // The API marks readiness only while running (its events type a stopping session `stopping`).
    expect(stateWords('stopping', true)).toBe('stopping');
  });

  it('formats durations and tables', () => {
    expect([duration(850), duration(12_500), duration(185_000), duration(-5)]).toEqual([
      '850 ms',
      '12.5 s',
      '3 min 5 s',
      '0 s',
    ]);
    expect(duration(7_500_000)).toBe('2 h 5 min');
    expect(
      table([
        ['A', 'BB'],
        ['ccc', 'd'],
      ]),
    ).toBe('A    BB\nccc  d');
  });

  it.each([
    [999.4, '999 ms'],
    [999.5, '1.0 s'],
    [1000, '1.0 s'],
    [59_949, '59.9 s'],
    [59_950, '1 min 0 s'],
    [59_999, '1 min 0 s'],
    [60_000, '1 min 0 s'],
    [299_499, '4 min 59 s'],
    [299_500, '5 min 0 s'],
    [299_600, '5 min 0 s'],
    [3_599_499, '59 min 59 s'],
    [3_599_500, '1 h 0 min'],
    [3_599_999, '1 h 0 min'],
    [3_600_000, '1 h 0 min'],
    [5_369_999, '1 h 29 min'],
    [5_370_000, '1 h 30 min'],
    [86_399_999, '24 h 0 min'],
    [Number.NaN, '-'],
  ])('rounds %d ms to the unit it shows before choosing the format: %s', (ms, shown) => {
    expect(duration(ms)).toBe(shown);
  });

  it('never shows a unit at its carry (1000 ms, 60.0 s, 60 s, 60 min), from 0 to 3 hours', () => {
    const carries = /^1000 ms$|^60\.0 s$| 60 s$| 60 min$/;
    // Every millisecond around each carry, and a step through the rest.
    const around = [1000, 60_000, 3_600_000, 3_660_000].flatMap((carry) =>
      Array.from({ length: 2001 }, (_, i) => carry - 1000 + i),
    );
    for (const ms of [...around, ...Array.from({ length: 10_800 }, (_, i) => i * 1000 + 499.5)])
      expect(duration(ms), `${ms} ms`).not.toMatch(carries);
  });

  it('escapes what the API said in an error line, which stays one line', () => {
    const err = new ApiError(
      500,
      'internal\x1b[2K' as ClientErrorCode,
      'boom\x1b]52;c;aGk=\x07\nunauthorized: forged',
      undefined,
    );
    expect(describeError(err)).toBe('internal\\x1b[2K: boom\\x1b]52;c;aGk=\\x07\\nunauthorized: forged');
    expect(describeError(new SessionExistsError(409, 'session_exists', 'x', undefined, 's\r1'))).toBe(
      'session_exists: the user already has session s\\r1',
    );
  });

  it("escapes a live session's fields, the endpoint it announced among them", () => {
    const opening = sessionOpening({
      userId: 'ann\u202e',
      words: 'running (ready)',
      fence: 3,
      sessionId: 's-1',
      workerId: 'host\n1',
      endpoint: '10.0.0.7:8080\x1b]8;;http://evil/\x07',
    });
    expect(opening).toEqual([
      'ann\\u202e: running (ready)',
      'fence 3',
      'session s-1',
      'on host\\n1',
      'at 10.0.0.7:8080\\x1b]8;;http://evil/\\x07',
    ]);
  });

  it("words a host's isolation, and what it leaves open", () => {
    expect(isolationWords({ network: 'none', filesystem: 'private', cpus: 0.5 })).toBe(
      'network none · files private · 0.5 CPU',
    );
    expect(isolationWords({ network: 'egress', filesystem: 'private', cpus: 2 })).toBe(
      'network egress · files private · 2 CPUs',
    );
    expect(isolationWords({ network: 'none', filesystem: 'shared', cpus: 1 })).toBe(
      'network none · files shared · 1 CPU (not isolated: files)',
    );
    expect(isolationWords({ network: 'host', filesystem: 'private', cpus: null })).toBe(
      'network host · files private · no CPU cap (not isolated: network)',
    );
    expect(isolationWords({ network: 'host', filesystem: 'shared', cpus: null })).toBe(
      'network host · files shared · no CPU cap (not isolated: network, files)',
    );
    // An API from before hosts said.
    expect(isolationWords(undefined)).toBe('-');
  });

  it('escapes table cells and aligns the columns by what is shown', () => {
    expect(
      table([
        ['URL', 'ERROR'],
        ['h\rx', 'refused\nforged row'],
      ]),
    ).toBe('URL   ERROR\nh\\rx  refused\\nforged row');
  });
});
