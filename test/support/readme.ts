import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ts from 'typescript';

export const ROOT = join(__dirname, '..', '..');

/**
 * A ```ts block of the README. `file` is set when its first line names one (`// src/app.module.ts`,
 * or `// test/orders.spec.ts` for the "Testing your app" files, which import the app's).
 */
export interface ReadmeBlock {
  readonly index: number;
  readonly line: number;
  readonly code: string;
  readonly file: string | null;
}

export function readmeBlocks(): ReadmeBlock[] {
  const md = readFileSync(join(ROOT, 'README.md'), 'utf8');
  return [...md.matchAll(/```ts\n([\s\S]*?)```/g)].map((m, i) => ({
    index: i + 1,
    line: md.slice(0, m.index).split('\n').length + 1,
    code: m[1],
    file: /^\/\/ ((?:src|test)\/[\w.-]+\.ts)\b/.exec(m[1])?.[1] ?? null,
  }));
}

/**
 * The app-side modules examples import relatively and leave to the reader ("your own code").
 * Only these may be missing: anything else a block uses it must import itself.
 */
export const APP_STUBS: Record<string, string> = {
  'pager.ts': 'export declare class Pager { alert(message: string): void }',
  'reports.ts': `
    export interface Report { dataReady: boolean }
    export declare function loadReport(id: number): Promise<Report | null>;
    export declare function renderReport(report: Report, opts: { signal: AbortSignal }): Promise<void>;`,
};

export const COMPILER_OPTIONS: ts.CompilerOptions = {
  strict: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.CommonJS,
  moduleResolution: ts.ModuleResolutionKind.Node10,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  skipLibCheck: true,
  noEmit: true,
  types: ['node'],
  // The package's own names, as an installed app writes them, mapped to the sources.
  baseUrl: ROOT,
  paths: { 'nestjs-pg-queue': ['lib/index.ts'], 'nestjs-pg-queue/*': ['lib/*/index.ts'] },
};

/**
 * What `nest new` writes today (@nestjs/schematics 12.0.6, lib/application/files/ts/tsconfig.json;
 * the app's package.json has no "type", so its files are CommonJS): module and moduleResolution
 * nodenext with isolatedModules. There a type-only export used in a decorated signature must be
 * imported with `type` (TS1272), and an `import()` of a relative path needs its extension (TS2835).
 * `strict` stands in for the template's strictNullChecks plus its --strict answers.
 */
export const NEST_NEW_COMPILER_OPTIONS: ts.CompilerOptions = {
  ...COMPILER_OPTIONS,
  target: ts.ScriptTarget.ES2023,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  resolvePackageJsonExports: true,
  isolatedModules: true,
  allowSyntheticDefaultImports: true,
};

/** Type-checks virtual files (absolute path -> source) against the library; returns the messages. */
export function typeCheck(files: Record<string, string>, options: ts.CompilerOptions = COMPILER_OPTIONS): string[] {
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  const exists = host.fileExists.bind(host);
  host.fileExists = (name) => name in files || exists(name);
  const dirs = new Set(Object.keys(files).map((f) => dirname(f)));
  const dirExists = host.directoryExists?.bind(host);
  host.directoryExists = (name) => dirs.has(name) || (dirExists ? dirExists(name) : true);
  host.readFile = (
    (orig) => (name: string) =>
      files[name] ?? orig(name)
  )(host.readFile.bind(host));
  host.getSourceFile = (name, lang, onError, create) =>
    name in files ? ts.createSourceFile(name, files[name], lang) : read(name, lang, onError, create);
  const program = ts.createProgram(Object.keys(files), options, host);
  return Object.keys(files).flatMap((f) =>
    ts.getPreEmitDiagnostics(program, program.getSourceFile(f)).map((d) => {
      const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
      return `${f.slice(dirname(f).length + 1)}:${at}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    }),
  );
}
