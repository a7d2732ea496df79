import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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

  it('the code as it stands passes them', async () => {
    const results = lint(['lib/worker/queue-worker.ts', 'lib/db/claim.ts']);
    expect(results.flatMap((r) => r.messages.map((m) => `${r.filePath}: ${m.ruleId} ${m.message}`))).toEqual([]);
  });
});
