// Targets and the printed table of the chaos suite.

import fs from 'node:fs';
import path from 'node:path';

const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

/**
 * Checks a scenario against the issue's targets. Correctness failures (a lost or failed job, a
 * duplicate beyond what a killed replica held, a replica that exited on its own, an unclean or
 * slow shutdown, jobs left after the drain) always fail the run; rate targets fail the full run
 * and are only reported by --short, whose phases are too short for a rate on a shared CI machine.
 */
export function evaluate(r, { short }) {
  const baseline = mean(r.phases.baseline.map((s) => s.n));
  const faultPct = r.phases.fault.length && baseline ? (100 * mean(r.phases.fault.map((s) => s.n))) / baseline : null;
  const recoveryPct = baseline ? (100 * mean(r.phases.recovery.map((s) => s.n))) / baseline : null;
  // "Reaches at least 95 % of baseline within 10 s of the fault's end": the best 3-second mean
  // in that window (the whole recovery phase where the issue sets no time).
  const window = r.phases.recovery.slice(0, r.recoverWithinMs === null ? undefined : r.recoverWithinMs / 1000).map((s) => s.n);
  let best = null;
  for (let i = 0; i + 3 <= window.length; i++) best = Math.max(best ?? 0, mean(window.slice(i, i + 3)));
  const reachedPct = best === null || !baseline ? null : (100 * best) / baseline;
  // Seconds from the fault's end to the start of the first full second above 90 % of baseline.
  const firstGood = r.phases.recovery.findIndex((s) => s.n >= 0.9 * baseline);
  const ttrS = firstGood === -1 ? null : firstGood;

  const failures = [];
  const warnings = [];
  const c = r.counts;
  if (c.lost > 0) failures.push(`${c.lost} committed job(s) never ran`);
  if (c.failed > 0) failures.push(`${c.failed} job(s) ended failed`);
  if (c.live > 0) failures.push(`${c.live} job(s) still in the queue after the drain`);
  if (c.duplicates > r.dupBound) failures.push(`${c.duplicates} duplicate run(s), more than the ${r.dupBound} job(s) killed replicas held`);
  for (const u of r.unexpected) failures.push(`replica ${u.pid} exited on its own (code ${u.code}, signal ${u.signal})`);
  r.shutdowns.forEach((s, i) => {
    if (s.code !== 0) failures.push(`replica ${i} exited with ${s.code ?? s.signal} on SIGTERM`);
    else if (s.ms > r.shutdownTimeoutMs) failures.push(`replica ${i} took ${s.ms} ms to exit on SIGTERM (shutdownTimeoutMs ${r.shutdownTimeoutMs})`);
  });
  const rate = [];
  if (reachedPct === null || reachedPct < 95) {
    rate.push(`the rate reached ${fmtPct(reachedPct)} of baseline${r.recoverWithinMs === null ? '' : ` within ${r.recoverWithinMs / 1000} s`} (target >= 95 %)`);
  }
  if (r.recoverWithinMs !== null && (ttrS === null || ttrS * 1000 > r.recoverWithinMs)) {
    rate.push(`back above 90 % of baseline after ${ttrS === null ? 'never' : `${ttrS} s`} (target <= ${r.recoverWithinMs / 1000} s)`);
  }
  // "Dead tuples return to a small, stable level after the idle transaction ends": at the
  // recovery's end, at most twice the level at which the maintenance node vacuums
  // (vacuumAtDeadTuples, 10,000 by default). Elsewhere only reported: while a backlog drains at
  // thousands of jobs/s, dead tuples between two maintenance passes (5 s) exceed that by design.
  const deadEnd = r.dead.recovery?.jobs ?? null;
  if (r.key === 'idle-in-transaction' && (deadEnd === null || deadEnd > 2 * r.vacuumAtDeadTuples)) {
    rate.push(`${deadEnd ?? 'n/a'} dead tuples in the jobs table at the recovery's end (target <= ${2 * r.vacuumAtDeadTuples})`);
  }
  (short ? warnings : failures).push(...rate);
  const deadPeak = Math.max(0, ...r.samples.map((x) => x.dead_jobs ?? 0));
  return { baseline, faultPct, recoveryPct, reachedPct, ttrS, deadPeak, failures, warnings };
}

const fmtPct = (x) => (x === null ? 'n/a' : `${Math.round(x)} %`);
const fmtMs = (x) => (x === null || x === undefined ? 'n/a' : x < 10 ? `${x.toFixed(1)} ms` : `${Math.round(x)} ms`);
const fmtDead = (d) => (d ? `${d.jobs}` : 'n/a');

/** Prints the table (and writes it to results/latest.{md,json}); returns true when a scenario failed. */
export function printReport(results, { short, config, outDir }) {
  const lines = [
    `Chaos suite, ${short ? 'short (CI)' : 'full'} run: ${config.rate} jobs/s offered, phases of ${config.baselineMs / 1000} s baseline, ` +
      `${config.faultMs / 1000} s fault, ${config.recoveryMs / 1000} s recovery; two replicas, concurrency 20 each.`,
    '',
    '| scenario | baseline | during fault | recovery phase | best 3 s after fault | time to recover | wait p99 baseline / recovery | lost | duplicates (bound) | dead tuples in jobs: peak / fault end / recovery end | SIGTERM exit | result |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of results) {
    const v = r.verdict;
    lines.push(
      `| ${r.title} | ${v.baseline === null ? 'n/a' : Math.round(v.baseline)} jobs/s | ${fmtPct(v.faultPct)} | ${fmtPct(v.recoveryPct)} | ${fmtPct(v.reachedPct)} | ` +
        `${v.ttrS === null ? 'never' : `${v.ttrS} s`} | ${fmtMs(r.latency.baseline?.p99)} / ${fmtMs(r.latency.recovery?.p99)} | ` +
        `${r.counts.lost} of ${r.counts.enqueued} | ${r.counts.duplicates} (${r.dupBound}) | ` +
        `${v.deadPeak} / ${fmtDead(r.dead.fault)} / ${fmtDead(r.dead.recovery)} | ` +
        `${r.shutdowns.map((s) => `${s.code ?? s.signal} in ${s.ms} ms`).join(', ')} | ${v.failures.length ? 'FAILED' : v.warnings.length ? 'ok (rate below target)' : 'ok'} |`,
    );
  }
  lines.push('');
  for (const r of results) {
    const extra = [...r.notes, `${r.backlogAtStop ?? 'n/a'} job(s) in the jobs table at SIGTERM`];
    lines.push(`- ${r.title}: ${extra.join('; ')}.`);
    for (const f of r.verdict.failures) lines.push(`  - FAILED: ${f}`);
    for (const w of r.verdict.warnings) lines.push(`  - below target (not fatal in --short): ${w}`);
  }
  const text = lines.join('\n');
  console.log('\n' + text + '\n');
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'latest.md'), text + '\n');
  fs.writeFileSync(path.join(outDir, 'latest.json'), JSON.stringify({ short, config, results }, null, 2));
  return results.some((r) => r.verdict.failures.length > 0);
}
