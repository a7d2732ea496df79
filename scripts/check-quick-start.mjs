// docs/quick-start.md shows what `npm start` prints and what the `curl` calls answer. This runs
// the sample for real and compares, so the page cannot drift from the code:
//
//   npm run docs:check          (builds, then: node scripts/check-quick-start.mjs)
//   npm run docs:quick-start    (the same run, but rewrites the checked blocks with what it saw)
//
// The run: scripts/start-sample.mjs (what `npm start` runs after building) on a fresh embedded
// PostgreSQL (PGQUEUE_SAMPLE_DATA_DIR in a temp dir, so the database is created and ids start
// at 1; DATABASE_URL ignored), PORT=0. Every ```text / ```console block of the page is preceded
// by a marker saying what it shows:
//
//   <!-- check: start-output -->  the first lines `npm start` prints, up to the curl hints. The
//                                 page may leave out Nest's start-up lines (InstanceLoader,
//                                 RoutesResolver, RouterExplorer) and the root-only "binaries"
//                                 line; every other line must be there.
//   <!-- check: curl -->          `$ command` lines, each followed by its output. The commands
//                                 run in bash, against the app's port; a GET runs once the queues
//                                 are idle (GET /health: nothing available, delayed or active), so
//                                 it sees the settled state the page describes.
//   <!-- check: stop-output -->   all the lines printed after Ctrl-C (SIGINT to the group).
//   <!-- check: none (why) -->    not checked, and why.
//
// Compared after normalising what changes between runs: Nest's pid and date, `+12ms`, the
// worker id (host:pid:random), ports, ISO timestamps, the shutdown log's measured waits, and the
// temp data dir (shown as .data).
// Also checked: the page's table of sample files names every file in sample/.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startInGroup } from './sample-process.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOC = path.join(root, 'docs', 'quick-start.md');
const DOC_BASE = 'http://127.0.0.1:3000'; // the page's URLs (the sample's default port)
const DOC_PG_PORT = '54329'; // the embedded server's preferred port, as the page shows it
const START_DEADLINE_MS = 120_000;
const IDLE_DEADLINE_MS = 30_000;
const STOP_DEADLINE_MS = 60_000;
const write = process.argv.includes('--write');

// Printed lines the page may leave out: Nest's start-up lines, and the line that only appears as
// root in a directory the postgres user cannot reach (the page says so in prose).
const TRIMMABLE = /^\[Nest\] .*\bLOG \[(InstanceLoader|RoutesResolver|RouterExplorer)\] |^\[sample\] PostgreSQL binaries in /;

/** Turns the parts that differ between runs into placeholders. */
function normalise(line) {
  return (
    line
      .replace(/^\[Nest\] \d+ +- \d\d\/\d\d\/\d{4}, \d{1,2}:\d\d:\d\d [AP]M +/, '[Nest] <pid> - <date> ')
      .replace(/ \+\d+ms$/, ' +<n>ms')
      .replace(/\([^()\s:]+:\d+:[0-9a-f]{6,}\)/g, '(<worker id>)')
      .replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:<port>')
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<timestamp>')
      // The shutdown log's measured waits ("Workers stopped after 1 ms (waited 1 ms ...").
      .replace(/\b(after|waited) \d+ ms\b/g, '$1 <n> ms')
      // The grace left when the stop began: shutdownTimeoutMs less the milliseconds already spent.
      .replace(/\bwaiting up to \d+ ms\b/g, 'waiting up to <n> ms')
      .trimEnd()
  );
}

/** The page's fenced blocks, with the marker before each. */
function parseDoc(text) {
  const lines = text.split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = lines[i].match(/^```(\w*)\s*$/);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && lines[end] !== '```') end++;
    let m = i - 1;
    while (m >= 0 && lines[m].trim() === '') m--;
    const marker = lines[m]?.match(/^<!-- check: ([\w-]+)(?: \((.*)\))? -->$/);
    blocks.push({ lang: open[1], start: i + 1, end, lines: lines.slice(i + 1, end), kind: marker?.[1] ?? null, line: i + 1 });
    i = end;
  }
  return { lines, blocks };
}

const failures = []; // blocks that differ from the run (--write rewrites them)
const proseFailures = []; // what --write cannot fix
const fail = (line, message) => failures.push(`docs/quick-start.md:${line}: ${message}`);

/**
 * Page lines (the first at line `firstLine` of the page) vs printed lines: in order, each equal
 * after normalising; `skip` may drop printed lines; `all`: nothing else may be printed.
 */
function compareLines(firstLine, expected, actual, { skip = () => false, all = false } = {}) {
  let j = 0;
  for (let i = 0; i < expected.length; i++) {
    while (j < actual.length && normalise(actual[j]) !== normalise(expected[i]) && skip(actual[j])) j++;
    if (j >= actual.length) return fail(firstLine + i, `the page shows a line that was not printed:\n  page:    ${expected[i]}`);
    if (normalise(actual[j]) !== normalise(expected[i])) {
      return fail(firstLine + i, `differs:\n  page:    ${expected[i]}\n  printed: ${actual[j]}`);
    }
    j++;
  }
  const extra = actual.slice(j).filter((l) => l.trim() !== '');
  if (all && extra.length) fail(firstLine + expected.length, `printed but not on the page:\n  ${extra.join('\n  ')}`);
}

function bash(command) {
  return new Promise((resolve) => {
    execFile('bash', ['-c', command], { encoding: 'utf8' }, (err, stdout, stderr) => {
      resolve({ ok: !err, output: stdout.replace(/\n$/, ''), stderr });
    });
  });
}

async function waitForIdle(base) {
  const deadline = Date.now() + IDLE_DEADLINE_MS;
  for (;;) {
    const body = await fetch(`${base}/health`).then((r) => r.json());
    const queues = Object.values(body.details?.pgqueue?.queues ?? {});
    if (queues.length && queues.every((q) => q.available === 0 && q.delayed === 0 && q.active === 0)) return;
    if (Date.now() > deadline) throw new Error(`the queues were not idle within ${IDLE_DEADLINE_MS} ms: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function main() {
  const text = fs.readFileSync(DOC, 'utf8');
  const { lines, blocks } = parseDoc(text);
  for (const b of blocks) {
    if ((b.lang === 'text' || b.lang === 'console') && !b.kind)
      fail(b.line, 'a ```' + b.lang + ' block without a `<!-- check: ... -->` marker');
    if (b.kind && !['start-output', 'curl', 'stop-output', 'none'].includes(b.kind)) fail(b.line, `unknown marker "${b.kind}"`);
  }
  for (const kind of ['start-output', 'stop-output']) {
    if (blocks.filter((b) => b.kind === kind).length !== 1)
      failures.push(`docs/quick-start.md: needs exactly one "${kind}" block`);
  }
  if (failures.length) return report(); // the page's markers are wrong: nothing to compare against
  for (const file of fs
    .readdirSync(path.join(root, 'sample'))
    .filter((f) => f.endsWith('.ts'))
    .sort()) {
    if (!text.includes('`sample/' + file + '`'))
      proseFailures.push(`docs/quick-start.md: the table of sample files does not name sample/${file}`);
  }

  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pgq-quick-start-'));
  fs.chmodSync(tmp, 0o711); // as root the server runs as `postgres`, which must traverse it
  const { DATABASE_URL: _unused, ...env } = process.env;
  const app = startInGroup(process.execPath, [path.join(root, 'scripts', 'start-sample.mjs')], {
    cwd: root,
    env: { ...env, PORT: '0', PGQUEUE_SAMPLE_DATA_DIR: path.join(tmp, 'pg') },
  });
  const replacements = new Map(); // block -> new lines (--write)
  let base = null;
  let pgPort = null;
  // What the page should show instead of this run's temp dir and ports.
  const forPage = (s) =>
    s
      .split(tmp)
      .join('.data')
      .split(base)
      .join(DOC_BASE)
      .replace(new RegExp(`127\\.0\\.0\\.1:${pgPort}/`, 'g'), `127.0.0.1:${DOC_PG_PORT}/`);
  try {
    [, base] = await app.waitFor(/Listening on (http:\/\/127\.0\.0\.1:\d+)\. Try:/, START_DEADLINE_MS);
    pgPort = app.text().match(/^\[sample\] database: postgres:\/\/[^@]+@127\.0\.0\.1:(\d+)\//m)?.[1];
    await app.waitFor(/curl -s http:\/\/127\.0\.0\.1:\d+\/metrics/, START_DEADLINE_MS); // the whole hint

    const printed = app.text().split(tmp).join('.data').split('\n');
    const startBlock = blocks.find((b) => b.kind === 'start-output');
    compareLines(startBlock.start + 1, startBlock.lines, printed, { skip: (l) => TRIMMABLE.test(l) });
    const hintEnd = printed.findIndex((l) => /curl -s http:\/\/127\.0\.0\.1:\d+\/metrics/.test(l));
    replacements.set(
      startBlock,
      printed
        .slice(0, hintEnd + 1)
        .filter((l) => !TRIMMABLE.test(l))
        .map(forPage),
    );

    for (const block of blocks.filter((b) => b.kind === 'curl')) {
      const out = [];
      for (let i = 0; i < block.lines.length;) {
        const cmd = block.lines[i].match(/^\$ (.*)$/)?.[1];
        if (!cmd) {
          fail(block.start + i + 1, `expected a "$ command" line, found: ${block.lines[i]}`);
          break;
        }
        let next = i + 1;
        while (next < block.lines.length && !block.lines[next].startsWith('$ ')) next++;
        const expected = block.lines.slice(i + 1, next);
        if (!/-X POST/.test(cmd)) await waitForIdle(base);
        const res = await bash(cmd.split(DOC_BASE).join(base));
        if (!res.ok) fail(block.start + i + 1, `\`${cmd}\` failed: ${res.stderr}`);
        const got = res.output === '' ? [] : res.output.split('\n');
        const before = failures.length;
        compareLines(block.start + i + 2, expected, got, { all: true });
        if (failures.length > before) failures[failures.length - 1] += `\n  (command: ${cmd})`;
        out.push(`$ ${cmd}`, ...got.map(forPage));
        i = next;
      }
      replacements.set(block, out);
    }
  } catch (e) {
    app.kill();
    fs.rmSync(tmp, { recursive: true, force: true });
    throw e;
  }

  const stop = await app.interrupt(STOP_DEADLINE_MS);
  fs.rmSync(tmp, { recursive: true, force: true });
  const stopBlock = blocks.find((b) => b.kind === 'stop-output');
  const after = stop.after.split('\n').filter((l) => l.trim() !== '');
  compareLines(stopBlock.start + 1, stopBlock.lines, after, { all: true });
  replacements.set(stopBlock, after);

  if (write) {
    const out = [...lines];
    for (const [block, newLines] of [...replacements].sort((a, b) => b[0].start - a[0].start)) {
      // A block equal but for pids, dates, ports... stays as it was: no churn from a regeneration.
      // Otherwise all of it is replaced, so that its ids, dates and timestamps stay consistent.
      const same = newLines.length === block.lines.length && newLines.every((l, i) => normalise(l) === normalise(block.lines[i]));
      if (!same) out.splice(block.start, block.end - block.start, ...newLines);
    }
    const next = out.join('\n');
    if (next !== text) {
      fs.writeFileSync(DOC, next);
      console.log(`[quick-start] rewrote the checked blocks of ${path.relative(root, DOC)} from this run; review the diff`);
    } else {
      console.log(`[quick-start] ${path.relative(root, DOC)} already matches this run`);
    }
    failures.length = 0;
    return report(); // what --write cannot fix (the table of sample files)
  }
  return report();
}

function report() {
  failures.push(...proseFailures);
  if (failures.length === 0) {
    console.log('[quick-start] docs/quick-start.md matches what npm start prints and what the curl calls answer');
    return 0;
  }
  console.error(`[quick-start] docs/quick-start.md has drifted (${failures.length} difference(s)):\n`);
  for (const f of failures) console.error(`${f}\n`);
  console.error('Fix the page, or run `npm run docs:quick-start` to rewrite its checked blocks from a real run.');
  return 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[quick-start] ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  },
);
