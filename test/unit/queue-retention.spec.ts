import { pruneClasses, QueueRetentions } from '../../lib/db/queue-retention';

const D = 86_400_000;
const base = { completedMs: D, cancelledMs: D, failedMs: null };

describe('retention per queue: which rows the batched delete takes', () => {
  it('with no queue of its own retention, as before: a day of retention on daily partitions goes by partition drop', () => {
    expect(pruneClasses(base, new Map(), D)).toEqual([
      {
        queue: null,
        except: [],
        rowByRow: { completed: null, cancelled: null, failed: null },
        rest: { completed: D, cancelled: D },
      },
    ]);
  });

  it('a retention shorter than a partition is deleted row by row', () => {
    const [c] = pruneClasses({ completedMs: 3_600_000, cancelledMs: D, failedMs: 5 }, new Map(), D);
    expect(c.rowByRow).toEqual({ completed: 3_600_000, cancelled: null, failed: 5 });
    expect(c.rest).toEqual({ completed: null, cancelled: D });
  });

  it('a queue that keeps longer holds the partitions: every shorter retention is then deleted row by row', () => {
    const own = new Map([['long', { completedMs: 30 * D, cancelledMs: D, failedMs: null }]]);
    const [others, long] = pruneClasses(base, own, D);
    expect(others).toMatchObject({ queue: null, except: ['long'], rowByRow: { completed: D, cancelled: D } });
    expect(long).toMatchObject({ queue: 'long', except: [], rowByRow: { completed: null, cancelled: D } });
    expect(long.rest).toEqual({ completed: 30 * D, cancelled: null });
  });

  it('completed jobs are deleted only when some retention keeps them (else completions write no history)', () => {
    const none = new QueueRetentions({ completedMs: 0, cancelledMs: D, failedMs: null });
    expect(none.keepsCompleted).toBe(false);
    expect(none.plan(D)[0].rowByRow.completed).toBeNull();
    const some = new QueueRetentions({ completedMs: 0, cancelledMs: D, failedMs: null });
    some.set('kept', { completedMs: D });
    expect(some.keepsCompleted).toBe(true);
    expect(some.plan(D)[0].rowByRow.completed).toBe(0);
    expect(some.of('kept')).toEqual({ completedMs: D, cancelledMs: D, failedMs: null });
    expect(some.dropAfterMs).toBe(D);
    expect(some.shortestMs).toBe(0);
  });
});
