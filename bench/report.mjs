// Turns the runs' metrics into the one table: medians with min-max, the ratio to the raw-SQL
// reference, and each target with met / missed.

/** Median, min and max of the defined values. */
export function summary(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = Math.floor(v.length / 2);
  const median = v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
  return { median, min: v[0], max: v[v.length - 1], n: v.length };
}

const fmtNum = (x, digits) =>
  x >= 100 || digits === 0 ? Math.round(x).toLocaleString('en-US') : x.toFixed(digits ?? (x >= 10 ? 1 : 2));

function fmt(s, digits) {
  if (!s) return '-';
  if (s.n === 1) return fmtNum(s.median, digits);
  return `${fmtNum(s.median, digits)} (${fmtNum(s.min, digits)}-${fmtNum(s.max, digits)})`;
}

/** l >= share of ref, or null when ref was not measured. */
const vs = (l, ref, share) => (ref == null ? null : l >= share * ref);

/**
 * The rows of the table, given the sizes of this run. `lib` / `gw` / `raw` name a run key and a
 * metric (gw: graphile-worker, where it runs the same workload); `target(lib, raw, fig, gw)` gets
 * medians and returns true (met), false (missed) or null (a reference not measured).
 */
export function rowSpecs(size) {
  const n = (x) => x.toLocaleString('en-US');
  const gwDrain = size.gwDrain && size.gwDrain !== size.drain ? ` (graphile-worker: ${n(size.gwDrain)})` : '';
  return [
    {
      label: `enqueue, 1 job per call, 10 concurrent callers (${n(size.single)} jobs)`,
      unit: 'jobs/s',
      lib: ['enqueue-single/lib', 'rate'],
      peers: true,
      gw: ['enqueue-single/gw', 'rate'],
      raw: ['enqueue-single/raw', 'rate'],
      target: { text: '>= 90% of raw', ok: (l, r) => vs(l, r, 0.9) },
    },
    {
      label: `bulk enqueue, addBulk of ${n(size.batch)} (${n(size.bulk)} jobs)`,
      unit: 'jobs/s',
      lib: ['enqueue-bulk/lib', 'rate'],
      peers: true,
      gw: ['enqueue-bulk/gw', 'rate'],
      raw: ['enqueue-bulk/raw', 'rate'],
      target: { text: '>= 95% of raw', ok: (l, r) => vs(l, r, 0.95) },
    },
    {
      label: `drain ${n(size.drain)} no-op jobs${gwDrain}, 1 process (concurrency 10)`,
      unit: 'jobs/s',
      lib: ['drain/lib-1p', 'rate'],
      gw: ['drain/gw-1p', 'rate'],
      raw: ['drain/raw-1p', 'rate'],
      notes: true,
      target: {
        text: '>= 85% of raw and >= 130% of graphile-worker',
        ok: (l, r, _fig, g) => (r == null || g == null ? null : l >= 0.85 * r && l >= 1.3 * g),
      },
    },
    {
      label: `drain ${n(size.drain)}${gwDrain}, 2 processes`,
      unit: 'jobs/s',
      lib: ['drain/lib-2p', 'rate'],
      gw: ['drain/gw-2p', 'rate'],
      raw: ['drain/raw-2p', 'rate'],
      notes: true,
      target: { text: '>= 100% of 1 process', ok: (l, _r, fig) => vs(l, fig('drain/lib-1p', 'rate'), 1) },
    },
    {
      label: `burst: drain of ${n(size.burst)} no-op jobs, 1 process (concurrency 10)`,
      unit: 'jobs/s',
      lib: ['burst/lib-1p', 'rate'],
      raw: ['burst/raw-1p', 'rate'],
      peers: true,
      notes: true,
      target: { text: '>= 90% of raw', ok: (l, r) => vs(l, r, 0.9) },
    },
    {
      label: 'burst: first job after the start (every process waits at the gate; from its opening)',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['burst/lib-1p', 'firstStartMs'],
      raw: ['burst/raw-1p', 'firstStartMs'],
      peers: true,
    },
    {
      label: "burst: time to full speed (first 50 ms at >= 90% of the middle half's rate)",
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['burst/lib-1p', 'fullSpeedMs'],
      raw: ['burst/raw-1p', 'fullSpeedMs'],
      peers: true,
    },
    {
      label: 'burst: ramp cost (wall time minus the drain at its steady rate)',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['burst/lib-1p', 'rampCostMs'],
      raw: ['burst/raw-1p', 'rampCostMs'],
      peers: true,
    },
    {
      label: `drain ${n(size.drain)}, 1 process: jobs started in the first second`,
      unit: 'jobs',
      lib: ['drain/lib-1p', 'firstSecondJobs'],
      raw: ['drain/raw-1p', 'firstSecondJobs'],
      target: { text: '>= 90% of raw', ok: (l, r) => vs(l, r, 0.9) },
    },
    {
      label: `first job from the worker process's start (fork; node, code, app boot included), ${n(size.burst)} waiting (raw column: the loop alone)`,
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['first-job/lib', 'firstJobMs'],
      raw: ['first-job/raw', 'firstJobMs'],
      notes: 'firstJob',
      target: { text: "<= 110% of raw's", ok: (l, r) => (r == null ? null : l <= 1.1 * r) },
    },
    {
      label: 'the same, raw column: the loop booted in an empty NestJS application context first',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['first-job/lib', 'firstJobMs'],
      raw: ['first-job/raw-nest', 'firstJobMs'],
      target: { text: "<= 110% of raw's", ok: (l, r) => (r == null ? null : l <= 1.1 * r) },
    },
    {
      label: 'worker CPU per 1,000 jobs, drain, 1 process (user + system)',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['drain/lib-1p', 'workerCpuMsPer1000'],
      gw: ['drain/gw-1p', 'workerCpuMsPer1000'],
      raw: ['drain/raw-1p', 'workerCpuMsPer1000'],
    },
    {
      label: 'PostgreSQL CPU per 1,000 jobs, drain, 1 process (every server process)',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['drain/lib-1p', 'postgresCpuMsPer1000'],
      gw: ['drain/gw-1p', 'postgresCpuMsPer1000'],
      raw: ['drain/raw-1p', 'postgresCpuMsPer1000'],
    },
    {
      label: 'worker CPU per 1,000 jobs, drain, 2 processes (both)',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['drain/lib-2p', 'workerCpuMsPer1000'],
      gw: ['drain/gw-2p', 'workerCpuMsPer1000'],
      raw: ['drain/raw-2p', 'workerCpuMsPer1000'],
    },
    {
      label: `enqueue-to-start latency p50 (${size.rate}/s for ${size.seconds} s, open loop)`,
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['latency/lib', 'p50'],
      peers: true,
      gw: ['latency/gw', 'p50'],
      raw: ['latency/raw', 'p50'],
      notes: 'sendP50',
      target: { text: "<= raw's", ok: (l, r) => (r == null ? null : l <= r) },
    },
    {
      label: 'latency p95',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['latency/lib', 'p95'],
      peers: true,
      gw: ['latency/gw', 'p95'],
      raw: ['latency/raw', 'p95'],
    },
    {
      label: 'latency p99',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['latency/lib', 'p99'],
      peers: true,
      gw: ['latency/gw', 'p99'],
      raw: ['latency/raw', 'p99'],
      notes: 'sendP99',
      target: { text: "<= raw's", ok: (l, r) => (r == null ? null : l <= r) },
    },
    {
      label: 'latency max',
      unit: 'ms',
      lowerIsBetter: true,
      lib: ['latency/lib', 'max'],
      peers: true,
      gw: ['latency/gw', 'max'],
      raw: ['latency/raw', 'max'],
      notes: 'sendMax',
    },
    {
      label: `drain ${n(size.drain)}, 1 process, ${n(size.history)} finished jobs in history (raw: empty)`,
      unit: 'jobs/s',
      lib: ['history/lib-1p', 'rate'],
      raw: ['drain/raw-1p', 'rate'],
      notes: true,
      target: { text: '>= 90% of empty-history drain', ok: (l, _r, fig) => vs(l, fig('drain/lib-1p', 'rate'), 0.9) },
    },
    ...[
      ['dashboard/open', 'every 2 s, as the pages do', '2 s'],
      ['dashboard/open-500ms', 'every 500 ms (4 times as often: the sensitivity)', '500 ms'],
    ].flatMap(([key, how, every]) => [
      {
        label: `drain ${n(size.dashboardDrain)}, 1 process, ${n(size.history)} in history, the app mounting the dashboard, its overview and a queue page open, polled ${how} (raw column: the same drain, no page open)`,
        unit: 'jobs/s',
        lib: [key, 'rate'],
        raw: ['dashboard/closed', 'rate'],
        notes: 'paired',
        target: { text: '>= 95% of no page open', ok: (l, r) => (r == null ? null : l >= 0.95 * r) },
      },
      {
        label: `CPU per job of that drain, polled every ${every} (its worker process and its database's backends; raw column: no page open)`,
        unit: 'ms',
        lowerIsBetter: true,
        digits: 3,
        lib: [key, 'cpuMsPerJob'],
        raw: ['dashboard/closed', 'cpuMsPerJob'],
        notes: 'paired',
        target: { text: '<= 105% of no page open', ok: (l, r) => (r == null ? null : l <= 1.05 * r) },
      },
      {
        label: `dashboard poll every ${every} (overview + queue page + its first jobs page) during that drain (the pages open since before it)`,
        unit: 'ms',
        lowerIsBetter: true,
        lib: [key, 'pollP95'],
        raw: ['-', '-'],
        notes: 'polls',
      },
    ]),
    {
      label: `drain ${n(size.rss)} (the RSS run), 1 process`,
      unit: 'jobs/s',
      lib: ['rss/lib-1p', 'rate'],
      raw: ['rss/raw', 'rate'],
      notes: true,
    },
    {
      label: 'worker RSS after warm-up (20% of the drain)',
      unit: 'MB',
      lowerIsBetter: true,
      digits: 1,
      lib: ['rss/lib-1p', 'rssWarmMB'],
      raw: ['rss/raw', 'rssWarmMB'],
    },
    {
      label: 'worker RSS at the end of the drain',
      unit: 'MB',
      lowerIsBetter: true,
      digits: 1,
      lib: ['rss/lib-1p', 'rssEndMB'],
      raw: ['rss/raw', 'rssEndMB'],
    },
    {
      label: 'worker RSS, largest deviation from warm-up',
      unit: '%',
      lowerIsBetter: true,
      digits: 1,
      lib: ['rss/lib-1p', 'rssMaxDevPct'],
      raw: ['rss/raw', 'rssMaxDevPct'],
      target: { text: 'flat within 20%', ok: (l) => l <= 20 },
    },
  ];
}

/** Worker CPU, server CPU, WAL and transactions per job of a drain run: the evidence column. */
function drainNotes(runs, key) {
  const m = (name) => summary((runs[key] ?? []).map((r) => r.metrics[name]))?.median;
  const workers = summary((runs[key] ?? []).map((r) => (r.metrics.workerCpuPct ?? []).reduce((a, b) => a + (b ?? 0), 0)));
  if (!workers) return '';
  const parts = [`worker CPU ${Math.round(workers.median)}%`];
  if (m('workerCpuMsPer1000') != null) parts.push(`${fmtNum(m('workerCpuMsPer1000'), 0)} ms CPU/1,000 jobs`);
  if (m('postgresCpuPct') != null) parts.push(`postgres ${Math.round(m('postgresCpuPct'))}%`);
  if (m('postgresCpuMsPer1000') != null) parts.push(`postgres ${fmtNum(m('postgresCpuMsPer1000'), 0)} ms CPU/1,000 jobs`);
  if (m('machineBusyPct') != null) parts.push(`machine ${Math.round(m('machineBusyPct'))}% busy`);
  parts.push(`${fmtNum(m('walBytesPerJob'), 0)} B WAL/job`, `${m('xactsPer100').toFixed(1)} tx/100 jobs`);
  return parts.join(', ');
}

/** The evidence column: drain counters, or the same latency measured from the call to add(). */
function notesFor(spec, runs) {
  if (spec.notes === 'polls') {
    const m = (name) => summary((runs[spec.lib[0]] ?? []).map((r) => r.metrics[name]));
    return m('polls')
      ? `p95 in the library column; p50 ${fmt(m('pollP50'))} ms, max ${fmt(m('pollMax'))} ms, ${fmt(m('polls'), 0)} polls per drain; ` +
          `the pages' first poll after the app's boot (the whole hour's throughput counted once), before the drain: ${fmt(m('firstPollMs'))} ms`
      : '';
  }
  if (spec.notes === 'firstJob') {
    const m = (key, name) => summary((runs[key] ?? []).map((r) => r.metrics[name]));
    const parts = [
      ['lib', 'first-job/lib'],
      ['raw', 'first-job/raw'],
      ['raw in Nest', 'first-job/raw-nest'],
    ]
      .filter(([, k]) => runs[k])
      .map(([w, k]) => `${w}: boot ${fmt(m(k, 'bootMs'), 0)} ms, all ${fmt(m(k, 'drainFromForkMs'), 0)} ms`);
    return parts.length ? `${parts.join('; ')} (from the fork)` : '';
  }
  if (spec.notes === 'paired') {
    // Each rep's open run over the closed run of the same rep (they ran back to back).
    const closed = new Map((runs[spec.raw[0]] ?? []).map((r) => [r.rep, r.metrics[spec.raw[1]]]));
    const ratios = (runs[spec.lib[0]] ?? []).map((r) => r.metrics[spec.lib[1]] / closed.get(r.rep));
    const s = summary(ratios.map((x) => 100 * x));
    return s ? `per rep, open / closed: ${fmt(s, 1)}% over ${s.n} interleaved rep(s)` : '';
  }
  const who = [['lib', spec.lib[0]], ...(spec.gw ? [['gw', spec.gw[0]]] : []), ['raw', spec.raw[0]]];
  if (spec.notes === true) {
    return who
      .map(([w, key]) => [w, drainNotes(runs, key)])
      .filter(([, n]) => n)
      .map(([w, n]) => `${w}: ${n}`)
      .join('; ');
  }
  if (typeof spec.notes === 'string') {
    const m = who.map(([w, key]) => [w, summary((runs[key] ?? []).map((r) => r.metrics[spec.notes]))]).filter(([, v]) => v);
    return m.length ? `from the call to add() instead: ${m.map(([w, v]) => `${w} ${fmt(v)}`).join(', ')}` : '';
  }
  return '';
}

/** Builds the rows (numbers for the JSON) and the markdown table. */
export function buildTable(runs, size, { judge }) {
  const fig = (key, metric) => summary((runs[key] ?? []).map((r) => r.metrics[metric]))?.median;
  const of = (ref) => (ref ? summary((runs[ref[0]] ?? []).map((r) => r.metrics[ref[1]])) : null);
  const specs = rowSpecs(size);
  const rows = specs
    .map((spec) => {
      const lib = of(spec.lib);
      const gw = of(spec.gw);
      const raw = of(spec.raw);
      const [bqpg, bqredis] = ['bqpg', 'bqredis'].map((k) =>
        spec.peers ? of([spec.lib[0].replace('/lib', `/${k}`), spec.lib[1]]) : null,
      );
      const ratio = lib && raw && raw.median ? lib.median / raw.median : null;
      const ratioGw = lib && gw && gw.median ? lib.median / gw.median : null;
      let met = null;
      // A target whose reference figure was not measured in this run (--only) is not judged.
      if (spec.target && lib) {
        const ok = spec.target.ok(lib.median, raw?.median, fig, gw?.median);
        met = ok === null ? null : ok;
      }
      return {
        label: spec.label,
        unit: spec.unit,
        lib,
        gw,
        bqpg,
        bqredis,
        raw,
        ratio,
        ratioGw,
        target: spec.target?.text ?? null,
        met,
        notes: notesFor(spec, runs),
      };
    })
    .filter((r) => r.lib || r.raw || r.gw || r.bqpg || r.bqredis);
  const pctOf = (x) => (x == null ? '-' : `${(100 * x).toFixed(0)}%`);
  const lines = [
    '| workload | unit | nestjs-pg-queue | graphile-worker | BullMQ on PostgreSQL | BullMQ on Redis | raw SQL (strong loop) | us / raw | us / graphile-worker | target | met? | evidence (CPU as % of one core) |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of rows) {
    const spec = specs.find((s) => s.label === r.label);
    const met = r.met == null ? '' : !judge ? 'not judged (smoke)' : r.met ? 'met' : '**missed**';
    lines.push(
      `| ${r.label} | ${r.unit} | ${fmt(r.lib, spec.digits)} | ${fmt(r.gw, spec.digits)} | ${fmt(r.bqpg, spec.digits)} | ${fmt(r.bqredis, spec.digits)} | ${fmt(r.raw, spec.digits)} | ${pctOf(r.ratio)} | ${pctOf(r.ratioGw)} | ${r.target ?? ''} | ${met} | ${r.notes} |`,
    );
  }
  return { rows, markdown: lines.join('\n') };
}
