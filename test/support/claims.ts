import type { INestApplicationContext } from '@nestjs/common';
import { runtimeOf } from './app';
import { waitFor } from './database';

/**
 * Resolves once the worker of `queue` in `app` has had a claim answered that began after this
 * call: the proof a "nothing was claimed" check needs that a claim had the chance. A worker has
 * at most two claims in flight, and both may have begun before the call; the third answer after
 * it is a claim that began after it.
 */
export async function afterFreshClaim(app: INestApplicationContext, queue: string, timeoutMs = 10_000): Promise<void> {
  const supervisor = runtimeOf(app).supervisor;
  const from = supervisor.claimsAnswered(queue);
  await waitFor(() => supervisor.claimsAnswered(queue) >= from + 3, {
    timeoutMs,
    message: () => `three claims of queue "${queue}" to be answered (answered ${supervisor.claimsAnswered(queue) - from})`,
  });
}
