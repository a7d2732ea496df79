import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ts from 'typescript';

export const ROOT = join(__dirname, '..', '..');

/**
 * A ```ts block of README.md or of a page of docs/. `file` is set when its first line names one
 * (`// src/app.module.ts`, or `// test/orders.spec.ts` for the "Testing your app" files, which
 * import the app's): such blocks are the files of the one example app, assembled across pages.
 */
export interface ReadmeBlock {
  readonly index: number;
  /** Where it is written: `README.md` or `docs/<page>.md`. */
  readonly source: string;
  readonly line: number;
  readonly code: string;
  readonly file: string | null;
}

/** The Markdown files whose ```ts blocks are compiled: README.md, then docs/*.md by name (not docs/api/). */
export function docSources(): string[] {
  const pages = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...pages];
}

/** Every ```ts block of `sources` (default: README.md and docs/*.md), numbered across them. */
export function readmeBlocks(sources: readonly string[] = docSources()): ReadmeBlock[] {
  let index = 0;
  return sources.flatMap((source) => blocksOf(source, readFileSync(join(ROOT, source), 'utf8'), () => ++index));
}

export function blocksOf(source: string, md: string, next: () => number): ReadmeBlock[] {
  return [...md.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => ({
    index: next(),
    source,
    line: md.slice(0, m.index).split('\n').length + 1,
    code: m[1],
    file: /^\/\/ ((?:src|test)\/[\w.-]+\.ts)\b/.exec(m[1])?.[1] ?? null,
  }));
}

/**
 * The example app's files, one block per file name. A file may be shown on several pages (the
 * README shows two of getting-started.md's), but only with the same text: a difference throws,
 * naming both places, since a reader would copy one of them and the tests would run the other.
 */
export function exampleAppFiles(blocks: readonly ReadmeBlock[] = readmeBlocks()): ReadmeBlock[] {
  const byFile = new Map<string, ReadmeBlock>();
  for (const b of blocks) {
    if (!b.file) continue;
    const first = byFile.get(b.file);
    if (!first) byFile.set(b.file, b);
    else if (first.code !== b.code) {
      throw new Error(
        `${b.file} is shown with different text in ${first.source}:${first.line} and ${b.source}:${b.line}; ` +
          'the example app is one app: make both blocks the same.',
      );
    }
  }
  return [...byFile.values()];
}

/**
 * The app-side modules examples import relatively and leave to the reader ("your own code").
 * Only these may be missing: anything else a block uses it must import itself.
 */
export const APP_STUBS: Record<string, string> = {
  'pager.ts': 'export declare class Pager { alert(message: string): void }',
  'mail-provider.ts': `
    export declare function sendMany(messages: { to: string }[]): Promise<{ messageId: string | null; error: string | null }[]>;`,
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
