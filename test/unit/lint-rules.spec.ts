import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * The layer rules in eslint.config.mjs fire (issue 10, point 21): a rule that silently stopped
 * matching would let the engine import Nest, reach up into the module, hold SQL or form a cycle,
 * with `npm run lint` still green.
 */
const ROOT = join(__dirname, '..', '..');
const ESLINT = join(ROOT, 'node_modules', 'eslint', 'bin', 'eslint.js');

/** ESLint as `npm run lint` runs it (a child process: jest cannot load its ES-module config). */
function lint(args: string[], input?: string): { filePath: string; messages: { ruleId: string | null; message: string }[] }[] {
  const r = spawnSync(process.execPath, [ESLINT, '--format', 'json', '--no-warn-ignored', ...args], {
    cwd: ROOT,
    input,
    encoding: 'utf8',
  });
  if (!r.stdout) throw new Error(`eslint printed nothing (exit ${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The rule ids each probe (code linted as if at `file`) trips, in one ESLint process. */
function lintMany(probes: { file: string; code: string }[]): string[][] {
  const script =
    "import fs from 'node:fs'; import { ESLint } from 'eslint'; const e = new ESLint();" +
    "const probes = JSON.parse(fs.readFileSync(0, 'utf8'));" +
    'const out = []; for (const p of probes) { const [r] = await e.lintText(p.code, { filePath: p.file });' +
    ' out.push(r.messages.map((m) => m.ruleId ?? m.message)); } console.log(JSON.stringify(out));';
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: ROOT,
    input: JSON.stringify(probes),
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`eslint failed (exit ${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function ruleIds(code: string, file: string): Promise<string[]> {
  return lint(['--stdin', '--stdin-filename', file], code).flatMap((r) => r.messages.map((m) => m.ruleId ?? m.message));
}

describe('the layer rules', () => {
  it('lib/worker and lib/db may not import Nest', async () => {
    expect(
      await ruleIds(`import { Injectable } from '@nestjs/common';\nexport const x = Injectable;\n`, 'lib/worker/probe.ts'),
    ).toContain('no-restricted-imports');
    expect(
      await ruleIds(`import { Injectable } from '@nestjs/common';\nexport const x = Injectable;\n`, 'lib/db/probe.ts'),
    ).toContain('no-restricted-imports');
  });

  it('a lower layer may not reach up', async () => {
    const up = `import { QueueService } from '../module/queue.service';\nexport const x = QueueService;\n`;
    expect(await ruleIds(up, 'lib/worker/probe.ts')).toContain('no-restricted-imports');
    expect(await ruleIds(`import { Queue } from '../producer/queue';\nexport const x = Queue;\n`, 'lib/db/probe.ts')).toContain(
      'no-restricted-imports',
    );
  });

  it('SQL outside lib/db is refused, inside it is not', async () => {
    const sql = 'export const q = `SELECT id FROM jobs WHERE queue = $1`;\n';
    expect(await ruleIds(sql, 'lib/worker/probe.ts')).toContain('no-restricted-syntax');
    expect(await ruleIds(sql, 'lib/db/probe.ts')).not.toContain('no-restricted-syntax');
  });

  it('an import cycle is refused', async () => {
    const a = join(ROOT, 'lib', 'worker', '__lint_probe_a.ts');
    const b = join(ROOT, 'lib', 'worker', '__lint_probe_b.ts');
    try {
      writeFileSync(a, `import { b } from './__lint_probe_b';\nexport const a = () => b;\n`);
      writeFileSync(b, `import { a } from './__lint_probe_a';\nexport const b = () => a;\n`);
      const [result] = lint([a]);
      expect(result.messages.map((m) => m.ruleId)).toContain('import-x/no-cycle');
    } finally {
      rmSync(a, { force: true });
      rmSync(b, { force: true });
    }
  });

  // Every folder's rule (eslint.config.mjs, MAY_IMPORT): [file, import, refused?]. The refused
  // ones are the arrows the layers forbid; the allowed ones show a rule does not fire on clean code.
  const cases: [string, string, boolean][] = [
    ['lib/producer/probe.ts', '../worker/supervisor', true],
    ['lib/producer/probe.ts', '../db/executor', false],
    ['lib/decorators/probe.ts', '../module/pg-queue.constants', true],
    ['lib/decorators/probe.ts', '../producer/queue', true],
    ['lib/decorators/probe.ts', '../core/tokens', false],
    ['lib/discovery/probe.ts', '../module/pg-queue.runtime', true],
    ['lib/discovery/probe.ts', '../producer/enqueue', false],
    ['lib/module/probe.ts', '../dashboard/dashboard.service', true],
    ['lib/module/probe.ts', '../discovery/pg-queue.explorer', false],
    ['lib/health/probe.ts', '../db/job-store', true],
    ['lib/metrics/probe.ts', '../worker/supervisor', true],
    ['lib/metrics/probe.ts', '../health/pg-queue.health', true],
    ['lib/testing/probe.ts', '../db/test-databases', true],
    ['lib/testing/probe.ts', '../producer/queue', true],
    ['lib/dashboard/probe.ts', '../db/dashboard-store', true],
    ['lib/dashboard/probe.ts', '../module/pg-queue.constants', false],
    ['lib/dashboard/probe.ts', '../core/read-api', false],
    ['lib/dashboard/ui/probe.tsx', '../../db/job-store', true],
    ['lib/db/history/probe.ts', '../../worker/supervisor', true],
    ['lib/db/history/probe.ts', '../dashboard/reads', false],
    ['lib/index.ts', './metrics/pg-queue.metrics', true],
    ['lib/index.ts', './worker/supervisor', false],
  ];
  it('each folder refuses what its layer may not import, type-only too, and allows the rest', () => {
    // Type-only: the layers refuse a type as much as a value. One ESLint for all (each run costs seconds).
    const probes = cases.map(([file, from]) => ({ file, code: `import type { X } from '${from}';\nexport type Y = X;\n` }));
    const fired = lintMany(probes).map((ids) => ids.includes('no-restricted-imports'));
    expect(
      cases.map(([file, from, refused]) => `${file} <- ${from}: ${fired.shift() === refused ? 'as expected' : 'WRONG'}`),
    ).toEqual(cases.map(([file, from]) => `${file} <- ${from}: as expected`));
  });

  it('the code as it stands passes them', async () => {
    const results = lint([
      'lib/worker/queue-worker.ts',
      'lib/db/claim.ts',
      'lib/decorators/processor.decorator.ts',
      'lib/metrics/pg-queue.metrics.ts',
      'lib/health/pg-queue.health.ts',
      'lib/testing/pg-queue-tester.ts',
      'lib/testing/test-postgres.ts',
    ]);
    expect(results.flatMap((r) => r.messages.map((m) => `${r.filePath}: ${m.ruleId} ${m.message}`))).toEqual([]);
  });
});

/**
 * scripts/check-imports.mjs, run on a fixture tree: it sees what ESLint cannot (a cycle held by
 * `import type` or a re-export, which import-x/no-cycle skips) and every arrow against the layers.
 */
describe('the import check (npm run lint)', () => {
  const SCRIPT = join(ROOT, 'scripts', 'check-imports.mjs');

  function check(files: Record<string, string>): { status: number | null; out: string } {
    const root = mkdtempSync(join(tmpdir(), 'check-imports-'));
    try {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      }
      const r = spawnSync(process.execPath, [SCRIPT, '--root', root], { encoding: 'utf8' });
      return { status: r.status, out: r.stdout + r.stderr };
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }

  const clean = {
    'lib/core/job.ts': 'export interface Job { id: string }\n',
    'lib/db/store.ts': "import type { Job } from '../core/job';\nexport const read = (j: Job) => j.id;\n",
    'lib/worker/run.ts': "import { read } from '../db/store';\nexport const run = read;\n",
    'lib/module/runtime.ts': "export { run } from '../worker/run';\n",
    'lib/health/index.ts': "import type { run } from '../module/runtime';\nexport type R = typeof run;\n",
    'lib/index.ts': "export * from './module/runtime';\n",
  };

  it('passes a tree with no cycle and every import within its layer', () => {
    const { status, out } = check(clean);
    expect(out).toContain('no cycle, every import within its layer');
    expect(status).toBe(0);
  });

  it('finds a cycle made of type-only imports', () => {
    const { status, out } = check({
      ...clean,
      'lib/db/a.ts': "import type { B } from './b';\nexport interface A { b: B }\n",
      'lib/db/b.ts': "import type { A } from './a';\nexport interface B { a: A }\n",
    });
    expect(out).toContain('cycle: lib/db/a.ts -> lib/db/b.ts -> lib/db/a.ts');
    expect(status).toBe(1);
  });

  it('finds a cycle through a re-export and an import() type', () => {
    const { status, out } = check({
      ...clean,
      'lib/worker/a.ts': "export { b } from './b';\nexport const a = 1;\n",
      'lib/worker/b.ts': "export const b = 2;\nexport type C = import('./c').C;\n",
      'lib/worker/c.ts': "export type C = typeof import('./a').a;\n",
    });
    expect(out).toContain('cycle: lib/worker/a.ts -> lib/worker/b.ts -> lib/worker/c.ts -> lib/worker/a.ts');
    expect(status).toBe(1);
  });

  it('finds an import from a lower layer up to a higher one, type-only too', () => {
    const { status, out } = check({
      ...clean,
      'lib/db/up.ts': "import type { R } from '../health';\nexport type U = R;\n",
      'lib/metrics/reach.ts':
        "import type { Job } from '../core/job';\nexport { read } from '../db/store';\nexport type J = Job;\n",
    });
    expect(out).toContain('layer: lib/db/up.ts (db) imports lib/health/index.ts (health): db may import core');
    expect(out).toContain('layer: lib/metrics/reach.ts (metrics) imports lib/db/store.ts (db): metrics may import core, module');
    expect(out).not.toContain('lib/core/job.ts (core)');
    expect(status).toBe(1);
  });

  it('refuses a folder no layer names', () => {
    const { status, out } = check({
      ...clean,
      'lib/extra/x.ts': "import type { Job } from '../core/job';\nexport type X = Job;\n",
    });
    expect(out).toContain('lib/extra/x.ts is in no layer');
    expect(status).toBe(1);
  });
});
