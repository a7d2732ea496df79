import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import {
  APP_STUBS,
  blocksOf,
  COMPILER_OPTIONS,
  docSources,
  exampleAppFiles,
  NEST_NEW_COMPILER_OPTIONS,
  readmeBlocks,
  ROOT,
  typeCheck,
} from '../support/readme';

/**
 * Every ```ts block of README.md and of every page of docs/ must type-check against the library
 * with nothing but its own imports, so a reader can copy it as it stands. The blocks that name a
 * file (`// src/...`, `// test/...`) form one app, assembled across pages, and are checked
 * together; test/integration/readme-app.int-spec.ts and readme-testing.int-spec.ts also run it.
 */
const dir = join(ROOT, 'test', 'unit', '__readme__');
const stubs = Object.fromEntries(Object.entries(APP_STUBS).map(([f, code]) => [join(dir, f), code]));

describe.each([
  ['classic settings (module commonjs, moduleResolution node10)', COMPILER_OPTIONS],
  ['the settings `nest new` writes today (nodenext, isolatedModules)', NEST_NEW_COMPILER_OPTIONS],
])('README and docs/ examples under %s', (_settings, options) => {
  const blocks = readmeBlocks();
  const app = exampleAppFiles(blocks);
  const alone = blocks.filter((b) => !b.file);

  it('has examples to check, and a complete app among them', () => {
    expect(alone.length).toBeGreaterThanOrEqual(5);
    expect(app.map((b) => b.file)).toEqual(expect.arrayContaining(['src/app.module.ts', 'src/main.ts', 'test/orders.spec.ts']));
  });

  // One program for every block (each is a module of its own), so the library is parsed once.
  // App files keep their folder (test/ files import ../src/...); messages name files by basename.
  const fileOf = (b: (typeof blocks)[number]) => b.file ?? `block-${b.index}.ts`;
  let errors: string[] = [];
  beforeAll(() => {
    errors = typeCheck(
      { ...stubs, ...Object.fromEntries([...app, ...alone].map((b) => [join(dir, fileOf(b)), b.code])) },
      options,
    );
  });

  it('the app files type-check together', () => {
    const names = new Set(app.map((b) => basename(fileOf(b))));
    expect(errors.filter((e) => names.has(e.split(':')[0]))).toEqual([]);
  });

  it.each(alone.map((b) => [b.index, `${b.source}:${b.line}`, b]))(
    'block %i (%s) type-checks with its own imports',
    (_i, _at, b) => {
      expect(errors.filter((e) => e.startsWith(`${fileOf(b)}:`))).toEqual([]);
    },
  );

  it('nothing else fails to compile', () => {
    expect(errors.filter((e) => !e.startsWith('block-') && !app.some((b) => e.startsWith(`${basename(fileOf(b))}:`)))).toEqual(
      [],
    );
  });

  it('a block that leaves out an import fails the check (so the check can fail)', () => {
    const withoutImports = alone[0].code.replace(/^import .*$/gm, '');
    expect(typeCheck({ ...stubs, [join(dir, 'broken.ts')]: withoutImports }, options).length).toBeGreaterThan(0);
  });
});

describe('the example app across pages', () => {
  it('reads README.md and every page of docs/', () => {
    const sources = docSources();
    expect(sources[0]).toBe('README.md');
    expect(sources).toEqual(expect.arrayContaining(['docs/getting-started.md', 'docs/testing.md', 'docs/configuration.md']));
    expect(new Set(readmeBlocks().map((b) => b.source)).size).toBeGreaterThan(5);
  });

  it('a file shown on two pages with different text fails, naming both places', () => {
    let n = 0;
    const one = blocksOf('docs/a.md', 'x\n```ts\n// src/main.ts\nconst a = 1;\n```\n', () => ++n);
    const other = blocksOf('docs/b.md', '```ts\n// src/main.ts\nconst a = 2;\n```\n', () => ++n);
    expect(() => exampleAppFiles([...one, ...other])).toThrow(/src\/main\.ts .* docs\/a\.md:3 and docs\/b\.md:2/);
    expect(exampleAppFiles([...one, ...one])).toHaveLength(1);
  });

  it('the README shows files of the example app with the same text as getting-started.md', () => {
    const readme = readmeBlocks(['README.md']).filter((b) => b.file);
    expect(readme.length).toBeGreaterThan(0);
    const started = new Map(readmeBlocks(['docs/getting-started.md']).map((b) => [b.file, b.code]));
    for (const b of readme) expect([b.file, started.get(b.file)]).toEqual([b.file, b.code]);
  });
});

describe('the README', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const lines = readme.split('\n');

  it('stays short: at most 300 lines (the pages of docs/ hold the rest)', () => {
    expect(lines.length).toBeLessThanOrEqual(300);
  });

  it('puts the install and the pointer for @nestjs/bullmq users on its first screen', () => {
    const firstScreen = lines.slice(0, 60).join('\n');
    expect(firstScreen).toContain('npm install nestjs-pg-queue');
    expect(firstScreen).toContain('/docs/migrating-from-bullmq.md');
    expect(firstScreen).toContain('## Requirements');
  });
});

describe('install lines', () => {
  it('pin @nestjs/testing to the Nest major the examples are tested with (a plain install takes the next major, which npm refuses)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    const installs = docSources()
      .flatMap((f) => [...readFileSync(join(ROOT, f), 'utf8').matchAll(/^npm install --save-dev (.*)$/gm)])
      .map((m) => m[1]);
    const testing = installs
      .map((line) => line.split('#')[0].trim().split(/\s+/))
      .flat()
      .filter((w) => w.startsWith('@nestjs/testing'));
    expect(testing.length).toBeGreaterThan(0);
    expect(new Set(testing)).toEqual(new Set([`@nestjs/testing@${pkg.devDependencies['@nestjs/common'].split('.')[0]}`]));
  });
});
