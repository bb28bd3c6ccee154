import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { CoordinatorError, ScriptReplyError, UnavailableError } from './errors.js';
import { isUnavailable, wrapRedisError } from './redis-errors.js';
import { TimeoutError } from './timeout.js';

/** An error as ioredis builds one it has no export for: a class known by its name. */
function named(name: string, message: string): Error {
  const err = new Error(message);
  Object.defineProperty(err, 'name', { value: name });
  return err;
}

function withCode(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('isUnavailable', () => {
  it.each([
    ['a closed connection', new Error('Connection is closed.')],
    ['no offline queue', new Error("Stream isn't writeable and enableOfflineQueue options is false")],
    ["ioredis's commandTimeout", new Error('Command timed out')],
    ['our own command timeout', new TimeoutError('Command', 1500)],
    ['ECONNREFUSED', withCode('connect ECONNREFUSED 127.0.0.1:6379', 'ECONNREFUSED')],
    ['ECONNRESET', withCode('read ECONNRESET', 'ECONNRESET')],
    ['ETIMEDOUT', withCode('connect ETIMEDOUT', 'ETIMEDOUT')],
    ['EPIPE', withCode('write EPIPE', 'EPIPE')],
    ['MaxRetriesPerRequestError', named('MaxRetriesPerRequestError', 'Reached the max retries per request limit')],
    ['AbortError', named('AbortError', 'Command aborted due to connection close')],
    ['ClusterAllFailedError', named('ClusterAllFailedError', 'Failed to refresh slots cache.')],
    ['a Cluster with no node', new Error('None of startup nodes is available')],
    ['a Cluster not ready', new Error("Cluster isn't ready and enableOfflineQueue options is false")],
    ['CLUSTERDOWN', new ReplyError('CLUSTERDOWN The cluster is down')],
    ['TRYAGAIN', new ReplyError('TRYAGAIN Multiple keys request during rehashing of slot')],
    ['LOADING', new ReplyError('LOADING Redis is loading the dataset in memory')],
    ['MASTERDOWN', new ReplyError('MASTERDOWN Link with MASTER is down')],
    ['READONLY', new ReplyError("READONLY You can't write against a read only replica.")],
    ['our UnavailableError', new UnavailableError(new Error('Connection is closed.'))],
    ['an outage as the cause', new Error('enqueue failed', { cause: withCode('read ECONNRESET', 'ECONNRESET') })],
  ])('counts %s as an outage', (_what, err) => {
    expect(isUnavailable(err)).toBe(true);
  });

  it.each([
    ['a TypeError', new TypeError("Cannot read properties of undefined (reading 'stream')")],
    ['a RangeError', new RangeError('Invalid time value')],
    ['a plain error that mentions Redis', new Error('redis connection stream timed out ECONN')],
    ['an ERR reply', new ReplyError('ERR wrong number of arguments')],
    ['a WRONGTYPE reply', new ReplyError('WRONGTYPE Operation against a key holding the wrong kind of value')],
    ['a script reply we do not understand', new ScriptReplyError('admit', [7])],
    ['a refusal of the coordinator', new CoordinatorError('no_session')],
    ['a string', 'Connection is closed.'],
    ['undefined', undefined],
  ])('does not count %s as an outage', (_what, err) => {
    expect(isUnavailable(err)).toBe(false);
  });
});

describe('wrapRedisError', () => {
  it('wraps an outage as UnavailableError with the outage as its cause', () => {
    const cause = withCode('connect ECONNREFUSED 127.0.0.1:6379', 'ECONNREFUSED');
    const wrapped = wrapRedisError(cause);
    expect(wrapped).toBeInstanceOf(UnavailableError);
    expect(wrapped.cause).toBe(cause);
  });

  it('passes a bug on as it is, with its stack', () => {
    const bug = new TypeError('x is not a function');
    expect(wrapRedisError(bug)).toBe(bug);
  });

  it('does not wrap an UnavailableError twice', () => {
    const outage = new UnavailableError(new Error('Connection is closed.'));
    expect(wrapRedisError(outage)).toBe(outage);
  });
});
