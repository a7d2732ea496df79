// Summarises a V8 CPU profile (.cpuprofile, from BENCH_CPU_PROF=dir or node --cpu-prof): self
// time per function and per package, largest first, as shares of the sampled time.
//
//   node bench/profile-top.mjs file.cpuprofile [--top=N]

import fs from 'node:fs';

const file = process.argv[2];
const top = Number((process.argv.find((a) => a.startsWith('--top=')) ?? '--top=25').slice(6));
if (!file) {
  console.error('usage: node bench/profile-top.mjs file.cpuprofile [--top=N]');
  process.exit(2);
}
const prof = JSON.parse(fs.readFileSync(file, 'utf8'));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map();
const dt = prof.timeDeltas;
for (let i = 0; i < prof.samples.length; i++) self.set(prof.samples[i], (self.get(prof.samples[i]) ?? 0) + (dt[i] ?? 0));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const fnTime = new Map();
const pkgTime = new Map();
for (const [id, t] of self) {
  const { functionName, url, lineNumber } = byId.get(id).callFrame;
  const where = url
    .replace(/^file:\/\//, '')
    .replace(/.*\/node_modules\//, 'node_modules/')
    .replace(/.*\/(dist|bench)\//, '$1/');
  const key = `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`;
  fnTime.set(key, (fnTime.get(key) ?? 0) + t);
  const pkg = !url
    ? functionName.startsWith('(')
      ? functionName
      : '(native)'
    : url.startsWith('node:')
      ? 'node:internal'
      : url.includes('/node_modules/')
        ? url
            .split('/node_modules/')
            .pop()
            .split('/')
            .slice(0, url.includes('/node_modules/@') ? 2 : 1)
            .join('/')
        : where.split('/').slice(0, 2).join('/');
  pkgTime.set(pkg, (pkgTime.get(pkg) ?? 0) + t);
}
const show = (m, n) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, t]) => `${((100 * t) / total).toFixed(1).padStart(5)}%  ${(t / 1000).toFixed(0).padStart(6)} ms  ${k}`)
    .join('\n');
console.log(
  `${file}: ${(total / 1000).toFixed(0)} ms sampled\n\nby package:\n${show(pkgTime, 15)}\n\nby function (self):\n${show(fnTime, top)}`,
);
