import type { RecordedStep } from '../core/steps';

/**
 * A recorded step as the job page shows it (`GET api/jobs/:id/steps`): times as ISO strings, a
 * step's duration, and a sleep whose wake time has passed (by the database's clock, `nowMs`)
 * shown done, since the job resumes from it at its next claim.
 */
export function stepView(s: RecordedStep, nowMs: number) {
  return {
    name: s.name,
    kind: s.kind,
    status: s.status === 'sleeping' && s.wakeAtMs !== null && s.wakeAtMs <= nowMs ? 'done' : s.status,
    result: s.result ?? null,
    attempt: s.attempt,
    startedAt: iso(s.startedAtMs),
    finishedAt: iso(s.finishedAtMs),
    wakeAt: iso(s.wakeAtMs),
    durationMs: s.kind === 'step' && s.startedAtMs !== null && s.finishedAtMs !== null ? s.finishedAtMs - s.startedAtMs : null,
  };
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
