import { QueueWorker, type QueueWorkerContext } from '../../lib/worker/queue-worker';
import { DEFAULTS } from '../../lib/core/options/defaults';
import { resolveQueueOptions } from '../../lib/core/options/module-checks';

// Node fires a timer longer than 2^31-1 ms after 1 ms (with a TimeoutOverflowWarning). A job may
// be delayed far longer (delayMs up to 100 years), and the NOTIFY of its insert wakes the worker
// with that delay: the wake-up timer must be capped, not overflow into a 1 ms busy wake-up.
describe('timers the worker arms', () => {
  it('a wake-up further out than 2^31-1 ms is capped at 2^31-1 ms, not fired after 1 ms', async () => {
    // Only wake()'s timer is exercised: nothing here reaches the store or the database.
    const ctx = { workerId: 'w', leaseMs: 30_000, pollIntervalMs: 2000 } as unknown as QueueWorkerContext;
    const worker = new QueueWorker(resolveQueueOptions({ name: 'far' }, DEFAULTS.job), new Map(), undefined, ctx);
    worker.wake(30 * 86_400_000);
    const dueTimer = () => (worker as unknown as { due: { timer: NodeJS.Timeout & { _idleTimeout: number } } }).due.timer;
    expect(dueTimer()._idleTimeout).toBe(2 ** 31 - 1);
    worker.wake(1000); // an earlier wake-up replaces it
    expect(dueTimer()._idleTimeout).toBe(1005);
    await worker.stopClaiming();
  });
});
