// Where the slowest pick-ups of a latency run went: reads what
// `BENCH_TRACE=1 BENCH_TRACE_OUT=/tmp/lt node bench/run.mjs --only=latency` wrote
// (/tmp/lt.<kind>.json: the worker's statements and notifications, each job's commit and start)
// and prints, for each kind, the percentiles, the slowest jobs by their position in the run, and
// what the worker sent from shortly before each one's commit to its start.
//
//   node bench/latency-tail.mjs /tmp/lt [--top=10] [--kinds=lib,raw]
//
// Times are the processes' own clocks (performance.timeOrigin + now()), so commit and start
// come from two processes on one machine.

import { existsSync, readFileSync } from 'node:fs';
import { percentiles } from './harness.mjs';

const args = process.argv.slice(2);
const prefix = args.find((a) => !a.startsWith('--'));
const flag = (name, dflt) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt;
if (!prefix) {
  console.error('usage: node bench/latency-tail.mjs <BENCH_TRACE_OUT prefix> [--top=10] [--kinds=lib,raw]');
  process.exit(2);
}
const top = Number(flag('top', '10'));
const kinds = flag('kinds', 'lib,lib-base,raw,gw').split(',');

for (const kind of kinds) {
  const file = `${prefix}.${kind}.json`;
  if (!existsSync(file)) continue;
  const { trace = [], starts, commits } = JSON.parse(readFileSync(file, 'utf8'));
  const committed = new Map(commits.map(([id, at]) => [String(id), at]));
  const order = new Map(
    commits
      .map(([id]) => String(id))
      .sort((a, b) => Number(a) - Number(b))
      .map((id, i) => [id, i]),
  );
  const jobs = starts
    .filter(([id]) => committed.has(String(id)))
    .map(([id, at]) => ({ id: String(id), committedAt: committed.get(String(id)), startedAt: at }))
    .map((j) => ({ ...j, ms: j.startedAt - j.committedAt }));
  // The bench's own percentiles, so these figures are the ones its report printed for the run.
  const pct = percentiles(jobs.map((j) => j.ms));
  console.log(
    `\n${kind}: ${jobs.length} jobs, p50 ${pct(50).toFixed(2)} ms, p99 ${pct(99).toFixed(2)} ms, max ${pct(100).toFixed(2)} ms`,
  );
  const events = trace.slice().sort((a, b) => a[0] - b[0]);
  for (const j of jobs.sort((a, b) => b.ms - a.ms).slice(0, top)) {
    console.log(`  job #${order.get(j.id)} of the run: ${j.ms.toFixed(2)} ms`);
    for (const [at, ms, rows, label] of events) {
      if (at + ms < j.committedAt - 2 || at > j.startedAt) continue;
      const what = rows === 'notification' ? `notification ${label}` : `${ms.toFixed(2)} ms, ${rows} row(s): ${label}`;
      console.log(`    ${(at - j.committedAt).toFixed(2).padStart(8)} ms  ${what}`);
    }
  }
}
