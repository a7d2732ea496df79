import { PgQueueConfigError } from '../../lib';
import { DEFAULTS } from '../../lib/core/options/defaults';
import { firstDifference, isBareRegistration, mergeRegistrations } from '../../lib/core/options/queue-registrations';

// Issue 24, point 5: a queue registered in several modules. A mismatch names the option and both
// values; a bare registerQueue({ name }) takes the options of the full one, in either order.

describe('queue registrations', () => {
  it('bare: the name, and at most the connection', () => {
    expect(isBareRegistration({ name: 'a' })).toBe(true);
    expect(isBareRegistration({ name: 'a', connection: 'bulk', concurrency: undefined })).toBe(true);
    expect(isBareRegistration({ name: 'a', concurrency: 10 })).toBe(false);
  });

  it('names the first option that differs, with its path and both values', () => {
    expect(firstDifference({ a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [1, 3] } })).toEqual({ path: 'b.c.1', a: '2', b: '3' });
    expect(firstDifference({ a: null }, { a: { x: 1 } })).toEqual({ path: 'a', a: 'null', b: '{"x":1}' });
    expect(firstDifference({ a: 1 }, { a: 1 })).toBeNull();
  });

  it('compares a function (defaultJobOptions.group) by its source: the same arrow twice is the same option', () => {
    expect(firstDifference({ g: (p: { t: string }) => p.t }, { g: (p: { t: string }) => p.t })).toBeNull();
    expect(firstDifference({ g: (p: { t: string }) => p.t }, { g: (p: { u: string }) => p.u })).toMatchObject({ path: 'g' });
    expect(firstDifference({ g: () => 'x' }, {})).toMatchObject({ path: 'g', b: 'undefined' });
  });

  it('two full registrations that differ: the message names the option and both values', () => {
    const merge = () =>
      mergeRegistrations(
        [
          { name: 'mail', concurrency: 5, defaultJobOptions: { attempts: 3 } },
          { name: 'mail', concurrency: 5, defaultJobOptions: { attempts: 7 } },
        ],
        DEFAULTS.job,
      );
    expect(merge).toThrow(PgQueueConfigError);
    expect(merge).toThrow(/Queue "mail" is registered twice with different options: defaultJobOptions\.attempts is 3 .* and 7 /);
  });

  it("a bare registration takes the full one's options, before or after it", () => {
    const full = { name: 'mail', concurrency: 3, limiter: { max: 5, durationMs: 1000 } };
    for (const order of [
      [{ name: 'mail' }, full],
      [full, { name: 'mail' }],
    ]) {
      const merged = mergeRegistrations(order, DEFAULTS.job).get('mail')!;
      expect(merged).toMatchObject({ concurrency: 3, limiter: { max: 5, durationMs: 1000 }, connection: 'default' });
    }
    expect(mergeRegistrations([{ name: 'solo' }], DEFAULTS.job).get('solo')).toMatchObject({ concurrency: 10 });
  });

  it('a bare registration that names another connection than the full one is refused, naming it', () => {
    expect(() =>
      mergeRegistrations(
        [
          { name: 'bulk', connection: 'other' },
          { name: 'bulk', connection: 'big', concurrency: 2 },
        ],
        DEFAULTS.job,
      ),
    ).toThrow(/connection is "big" in one registerQueue\(\.\.\.\) and "other" in another/);
  });
});
