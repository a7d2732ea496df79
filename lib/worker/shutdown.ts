import type { JobStore } from '../db/job-store';
import { ShutdownError } from '../core/errors';
import type { Completer } from './completer';
import type { EngineLogger } from './logger';
import type { QueueWorker } from './queue-worker';

/** How long shutdown waits to remove this node's registry row. */
const NODE_REMOVAL_WAIT_MS = 2000;

export const TIMED_OUT = Symbol('timed out');

/** `p`, or TIMED_OUT once `ms` passed (the timer cleared either way). */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<typeof TIMED_OUT>((r) => (timer = setTimeout(() => r(TIMED_OUT), ms)));
  return Promise.race([p, gaveUp]).finally(() => clearTimeout(timer));
}

/** What stopping the workers needs. */
export interface WorkersShutdown {
  readonly store: JobStore;
  readonly completer: Completer;
  readonly workerId: string;
  readonly logger: EngineLogger;
  readonly shutdownTimeoutMs: number;
}

/**
 * The workers' part of a graceful stop: claim nothing more, let running jobs finish until
 * `deadline`, write their outcomes, then hand whatever still runs back to the queue so another
 * worker takes it at once (its interrupted attempt is not counted).
 */
export async function stopWorkers(workers: readonly QueueWorker[], s: WorkersShutdown, deadline: number): Promise<void> {
  const began = Date.now();
  // Said at once: a SIGTERM that seems to hang (or ends fast) shows in the log what it waits for.
  const running = workers.reduce((n, w) => n + w.runningCount, 0);
  if (workers.length) {
    s.logger.log(
      `Stopping workers: ${running} job(s) running, waiting up to ${Math.max(0, deadline - began)} ms ` +
        '(shutdownTimeoutMs) for them to finish',
    );
  }
  // A claim stuck on an unreachable database must not hold shutdown past its deadline.
  await withTimeout(Promise.all(workers.map((w) => w.stopClaiming())), s.shutdownTimeoutMs);
  // Prefetched jobs that never started go back first, so other workers can take them now.
  const unstarted = workers.flatMap((w) => w.takeBuffer());
  if (unstarted.length) {
    await s.store.handBack(unstarted, s.workerId).catch((err: Error) => {
      s.logger.warn(
        `Handing back ${unstarted.length} prefetched job(s) failed (${err.message}); the rescuer will after their lease`,
      );
    });
  }
  await withTimeout(Promise.all(workers.map((w) => w.idle())), Math.max(0, deadline - Date.now()));
  const abandoned = workers.flatMap((w) => w.abandon(new ShutdownError()));
  const waited = Date.now() - began;
  // Outcomes get at least a couple of seconds even when the grace period is spent: losing
  // them means running those jobs again.
  const left = await s.completer.drain(Math.max(deadline, Date.now() + 2000));
  if (left) s.logger.warn(`${left} job outcome(s) could not be written; those jobs will run again after their lease`);
  if (abandoned.length) {
    try {
      const n = await s.store.handBack(abandoned, s.workerId);
      s.logger.warn(`Handed ${n} unfinished job(s) back to the queue at shutdown`);
    } catch (err) {
      s.logger.warn(
        `Handing back ${abandoned.length} job(s) failed (${(err as Error).message}); the rescuer will after their lease`,
      );
    }
  }
  if (workers.length) {
    const interrupted = abandoned.length ? `${abandoned.length} job(s) interrupted at the deadline` : 'every job finished';
    const prefetched = unstarted.length ? `, ${unstarted.length} prefetched job(s) handed back unstarted` : '';
    s.logger.log(
      `Workers stopped after ${Date.now() - began} ms (waited ${waited} ms for running jobs: ${interrupted}${prefetched})`,
    );
  }
}

/**
 * Removes this node's registry row once the heartbeat in flight (`beat`) ended, so a late beat
 * cannot put it back. Best effort, and bounded: a database that does not answer (a blackholed
 * network, a pooler waiting for a server) must not hold shutdown; the maintenance pass prunes a stale row.
 */
export async function removeNodeRow(
  store: JobStore,
  workerId: string,
  beat: Promise<unknown>,
  logger: EngineLogger,
): Promise<void> {
  const removed = (async () => {
    await beat;
    await store.removeNode(workerId);
  })();
  removed.catch(() => undefined);
  try {
    if ((await withTimeout(removed, NODE_REMOVAL_WAIT_MS)) === TIMED_OUT) {
      logger.warn(
        `Removing this node from the registry took over ${NODE_REMOVAL_WAIT_MS} ms; maintenance drops it after 10 heartbeats`,
      );
    }
  } catch (err) {
    logger.warn(
      `Removing this node from the registry failed (${(err as Error).message}); maintenance drops it after 10 heartbeats`,
    );
  }
}
