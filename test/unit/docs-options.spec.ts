import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ts from 'typescript';
import { docSources, ROOT } from '../support/readme';

/**
 * The option tables of the docs against the option types. Before each table a page writes
 * `<!-- options: TypeName -->`; the table's first column holds each key in backticks (`retention.completedMs`
 * counts as `retention`; `delayMs` / `runAt` as both). Its keys must be the type's top-level keys,
 * read with the TypeScript compiler from the public entry points: a key the docs miss, or one
 * the type does not have, fails, naming the type and the page.
 */
const ENTRY_POINTS = [
  'lib/index.ts',
  'lib/health/index.ts',
  'lib/metrics/index.ts',
  'lib/dashboard/index.ts',
  'lib/testing/index.ts',
];

/** Every options type a user passes: each must have a table. */
const MUST_HAVE_TABLE = [
  'PgQueueModuleOptions',
  'PgQueueConnectionOptions',
  'RegisterQueueOptions',
  'QueueGroupOptions',
  'RegisterQueueAsyncOptions',
  'RepeatOptions',
  'ProcessorOptions',
  'ProcessOptions',
  'BatchOptions',
  'EnqueueOptions',
  'BackoffOptions',
  'PgQueueHealthThresholds',
  'PgQueueMetricsOptions',
  'PgQueueDashboardOptions',
  'PgQueueDashboardAsyncOptions',
  'PgQueueTestingOptions',
  'PgQueueDrainOptions',
  'TestPostgresOptions',
  'GetJobsOptions',
  'PromoteJobsOptions',
  'GetJobLogsOptions',
  'GroupCountsOptions',
  'CleanOptions',
  'ObliterateOptions',
  'RetryJobsOptions',
  'RemoveJobsOptions',
  'CancelJobsOptions',
  'DeduplicationOptions',
  'WaitForJobOptions',
  'StepOptions',
  'WaitForOptions',
];

/** Options types documented by another type's table, which must hold every one of their keys. */
const COVERED_BY: Record<string, string> = {
  JobOptions: 'EnqueueOptions', // addBulk's opts: the job options without manager, client, dependsOn
  FlowJobOptions: 'EnqueueOptions', // a flow job's opts: the same without uniqueKey, replaceWaiting
  PgQueueQueueThresholds: 'PgQueueHealthThresholds', // an entry of `queues`: the four queue limits
  PgQueueDashboardFactoryOptions: 'PgQueueDashboardOptions', // registerAsync's factory: all but path, guards
  BatchProcessOptions: 'ProcessOptions', // @Process's options with batch required (the batch overload)
};

interface OptionsTable {
  readonly type: string;
  readonly at: string;
  readonly keys: string[];
}

/** The tables after each `<!-- options: T -->` marker of one page. */
export function optionTables(source: string, md: string): OptionsTable[] {
  const lines = md.split('\n');
  const out: OptionsTable[] = [];
  lines.forEach((line, i) => {
    const m = /^<!-- options: (\w+) -->$/.exec(line.trim());
    if (!m) return;
    let j = i + 1;
    while (j < lines.length && lines[j].trim() === '') j++;
    const rows: string[] = [];
    for (; j < lines.length && lines[j].startsWith('|'); j++) rows.push(lines[j]);
    const keys = rows
      .slice(2) // the header and the --- row
      .flatMap((row) => [...(row.split(/(?<!\\)\|/)[1] ?? '').matchAll(/`([^`]+)`/g)].map((k) => k[1].split(/[.(]/)[0].trim()));
    out.push({ type: m[1], at: `${source}:${i + 1}`, keys });
  });
  return out;
}

/** What is wrong with one table, compared with its type's keys. */
export function compareTable(table: OptionsTable, typeKeys: readonly string[]): string[] {
  const documented = new Set(table.keys);
  const actual = new Set(typeKeys);
  return [
    ...typeKeys.filter((k) => !documented.has(k)).map((k) => `${table.type} has \`${k}\`, missing from the table at ${table.at}`),
    ...[...documented]
      .filter((k) => !actual.has(k))
      .map((k) => `the table at ${table.at} lists \`${k}\`, which ${table.type} does not have`),
  ];
}

/** The top-level keys of every type exported by the entry points, by name. */
function exportedTypeKeys(): Map<string, string[]> {
  const program = ts.createProgram(
    ENTRY_POINTS.map((f) => join(ROOT, f)),
    {
      strict: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.CommonJS,
      experimentalDecorators: true,
      skipLibCheck: true,
      noEmit: true,
    },
  );
  const checker = program.getTypeChecker();
  const out = new Map<string, string[]>();
  for (const f of ENTRY_POINTS) {
    const module = checker.getSymbolAtLocation(program.getSourceFile(join(ROOT, f))!)!;
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (!(symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias))) continue;
      const type = checker.getDeclaredTypeOfSymbol(symbol);
      out.set(
        exported.name,
        checker.getPropertiesOfType(type).map((p) => p.name),
      );
    }
  }
  return out;
}

describe('option tables in the docs against the option types', () => {
  const types = exportedTypeKeys();
  const tables = docSources().flatMap((f) => optionTables(f, readFileSync(join(ROOT, f), 'utf8')));

  it('finds the types and the tables', () => {
    expect(types.get('PgQueueModuleOptions')).toEqual(expect.arrayContaining(['connection', 'retention', 'cronCatchUpMs']));
    expect(tables.length).toBeGreaterThanOrEqual(MUST_HAVE_TABLE.length);
  });

  it('every exported options type a user passes is in the list of tables (or covered by one)', () => {
    const optionTypes = [...types.keys()].filter((n) => /(Options|Thresholds)$/.test(n));
    expect(optionTypes.filter((n) => !MUST_HAVE_TABLE.includes(n) && !(n in COVERED_BY))).toEqual([]);
  });

  it('every options type a user passes has a table, once', () => {
    const missing = MUST_HAVE_TABLE.filter((t) => !tables.some((x) => x.type === t)).map(
      (t) => `no <!-- options: ${t} --> table in the docs`,
    );
    const twice = MUST_HAVE_TABLE.filter((t) => tables.filter((x) => x.type === t).length > 1).map(
      (t) =>
        `${t} has two tables: ${tables
          .filter((x) => x.type === t)
          .map((x) => x.at)
          .join(' and ')}`,
    );
    expect([...missing, ...twice]).toEqual([]);
  });

  it('each table names an exported type and lists exactly its top-level keys', () => {
    const problems = tables.flatMap((t) => {
      const keys = types.get(t.type);
      if (!keys) return [`the marker at ${t.at} names ${t.type}, which no entry point exports`];
      if (t.keys.length === 0) return [`the marker at ${t.at} is not followed by a table`];
      return compareTable(t, keys);
    });
    expect(problems).toEqual([]);
  });

  it.each(Object.entries(COVERED_BY))('%s: its keys are all in the table of %s', (covered, by) => {
    const table = tables.find((t) => t.type === by)!;
    expect(types.get(covered)!.filter((k) => !table.keys.includes(k))).toEqual([]);
  });

  it('a table with a row deleted fails, naming the key, the type and the page (so the check can fail)', () => {
    const page = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
    const without = page.replace(/^\| `cronCatchUpMs` \|.*\n/m, '');
    expect(without).not.toBe(page);
    const table = optionTables('docs/configuration.md', without).find((t) => t.type === 'PgQueueModuleOptions')!;
    expect(compareTable(table, types.get('PgQueueModuleOptions')!)).toEqual([
      expect.stringMatching(/^PgQueueModuleOptions has `cronCatchUpMs`, missing from the table at docs\/configuration\.md:\d+$/),
    ]);
  });

  it('a row the type does not have fails too', () => {
    const table: OptionsTable = { type: 'ProcessOptions', at: 'x.md:1', keys: ['name', 'cron', 'tz', 'batch', 'timezone'] };
    expect(compareTable(table, types.get('ProcessOptions')!)).toEqual([
      'the table at x.md:1 lists `timezone`, which ProcessOptions does not have',
    ]);
  });
});
