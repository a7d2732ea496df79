import { DashboardInputError } from '../../lib/dashboard/dashboard-input';
import {
  parseCleanBody,
  parseCountQuery,
  parseMatchingBody,
  parseNameBody,
  parseSearchQuery,
} from '../../lib/dashboard/dashboard-operations-input';
import { actionFilterOf, actionName } from '../../lib/dashboard/dashboard-request';

// The operator routes' input checks (pure); over HTTP: test/integration/dashboard-operations.int-spec.ts.

const refused = (f: () => unknown, msg: RegExp): void => {
  expect(f).toThrow(DashboardInputError);
  expect(f).toThrow(msg);
};

describe('dashboard operator input', () => {
  it('search: q trimmed, 1 to 1000 characters, no other parameter', () => {
    expect(parseSearchQuery({ q: '  invoice:7 ' })).toBe('invoice:7');
    expect(parseSearchQuery({ q: '42' })).toBe('42');
    refused(() => parseSearchQuery({}), /"q" must be a job id or a unique key/);
    refused(() => parseSearchQuery({ q: ' ' }), /"q" must be/);
    refused(() => parseSearchQuery({ q: 'x'.repeat(1001) }), /"q" must be/);
    refused(() => parseSearchQuery({ q: ['a', 'b'] }), /more than once/);
    refused(() => parseSearchQuery({ q: 'a', id: '1' }), /Unknown query parameter\(s\) id/);
  });

  it('count: a state, a name, an age for finished states only', () => {
    expect(parseCountQuery({ state: 'failed', name: 'a', olderThanMs: '60000' })).toEqual({
      state: 'failed',
      name: 'a',
      olderThanMs: 60000,
    });
    expect(parseCountQuery({ state: 'delayed' })).toEqual({ state: 'delayed', name: null, olderThanMs: null });
    refused(() => parseCountQuery({ state: 'paused' }), /"state" must be one of waiting/);
    refused(() => parseCountQuery({ state: 'active', olderThanMs: '1' }), /finished jobs only/);
    refused(() => parseCountQuery({ state: 'failed', olderThanMs: '1.5' }), /whole number of milliseconds/);
    refused(() => parseCountQuery({ state: 'failed', olderThanMs: '99999999999999999' }), /whole number of milliseconds/);
  });

  it('clean: a finished state, an age, an optional limit of at least 1', () => {
    expect(parseCleanBody({ state: 'completed', olderThanMs: 0 })).toEqual({ state: 'completed', olderThanMs: 0 });
    expect(parseCleanBody({ state: 'failed', olderThanMs: 1000, limit: 10 })).toEqual({
      state: 'failed',
      olderThanMs: 1000,
      limit: 10,
    });
    refused(() => parseCleanBody({ state: 'delayed', olderThanMs: 0 }), /one of completed, failed, cancelled/);
    refused(() => parseCleanBody({ state: 'failed', olderThanMs: -1 }), /whole number/);
    refused(() => parseCleanBody({ state: 'failed', olderThanMs: 0, limit: 1.5 }), /"limit"/);
    refused(() => parseCleanBody({ state: 'failed', olderThanMs: 0, type: 'x' }), /Unknown field\(s\) type/);
    refused(() => parseCleanBody([]), /JSON object/);
  });

  it('promote-all: an optional name', () => {
    expect(parseNameBody({})).toBeNull();
    expect(parseNameBody(undefined)).toBeNull();
    expect(parseNameBody({ name: 'remind' })).toBe('remind');
    refused(() => parseNameBody({ name: 3 }), /"name" must be a job name/);
    refused(() => parseNameBody({ count: 3 }), /Unknown field\(s\) count/);
  });

  it('matching: each action takes the states its call takes', () => {
    expect(parseMatchingBody('retry', { state: 'completed', name: 'x' })).toEqual({ state: 'completed', name: 'x' });
    expect(parseMatchingBody('cancel', { state: 'active' })).toEqual({ state: 'active', name: null });
    expect(parseMatchingBody('remove', { state: 'waiting-children' })).toEqual({ state: 'waiting-children', name: null });
    refused(() => parseMatchingBody('retry', { state: 'waiting' }), /retry-matching must be one of completed, failed, cancelled/);
    refused(() => parseMatchingBody('remove', { state: 'active' }), /remove-matching must be one of/);
    refused(() => parseMatchingBody('cancel', { state: 'completed' }), /cancel-matching must be one of/);
  });

  it("authorize's view: an action's filter from its body, and promote-bulk for several ids", () => {
    expect(actionFilterOf({ state: 'completed', olderThanMs: 0, limit: 5 })).toEqual({ state: 'completed', olderThanMs: '0' });
    expect(actionFilterOf({ name: 'x' })).toEqual({ name: 'x' });
    expect(actionFilterOf({})).toBeNull();
    expect(actionFilterOf(null)).toBeNull();
    expect(actionName({ action: 'promote', scope: 'ids', api: true }, ['1', '2'])).toBe('promote-bulk');
    expect(actionName({ action: 'promote', scope: 'ids', api: true }, ['1'])).toBe('promote');
    expect(actionName({ action: 'clean', scope: 'queue', api: true }, [])).toBe('clean');
  });
});
