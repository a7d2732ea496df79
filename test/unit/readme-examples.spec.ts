import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { APP_STUBS, COMPILER_OPTIONS, NEST_NEW_COMPILER_OPTIONS, readmeBlocks, ROOT, typeCheck } from '../support/readme';

/**
 * Every ```ts block of the README must type-check against the library with nothing but its own
 * imports, so a reader can copy it as it stands. The blocks that name a file (`// src/...`) form
 * one app and are checked together; test/integration/readme-app.int-spec.ts also runs that app.
 */
const dir = join(ROOT, 'test', 'unit', '__readme__');
const stubs = Object.fromEntries(Object.entries(APP_STUBS).map(([f, code]) => [join(dir, f), code]));

describe.each([
  ['classic settings (module commonjs, moduleResolution node10)', COMPILER_OPTIONS],
  ['the settings `nest new` writes today (nodenext, isolatedModules)', NEST_NEW_COMPILER_OPTIONS],
])('README examples under %s', (_settings, options) => {
  const blocks = readmeBlocks();
  const app = blocks.filter((b) => b.file);
  const alone = blocks.filter((b) => !b.file);

  it('has examples to check, and a complete app among them', () => {
    expect(alone.length).toBeGreaterThanOrEqual(5);
    expect(app.map((b) => b.file)).toEqual(expect.arrayContaining(['src/app.module.ts', 'src/main.ts']));
  });

  // One program for every block (each is a module of its own), so the library is parsed once.
  // App files keep their folder (test/ files import ../src/...); messages name files by basename.
  const fileOf = (b: (typeof blocks)[number]) => b.file ?? `block-${b.index}.ts`;
  let errors: string[] = [];
  beforeAll(() => {
    errors = typeCheck({ ...stubs, ...Object.fromEntries(blocks.map((b) => [join(dir, fileOf(b)), b.code])) }, options);
  });

  it('the app files type-check together', () => {
    const names = new Set(app.map((b) => basename(fileOf(b))));
    expect(errors.filter((e) => names.has(e.split(':')[0]))).toEqual([]);
  });

  it.each(alone.map((b) => [b.index, b.line, b]))('block %i (README line %i) type-checks with its own imports', (_i, _l, b) => {
    expect(errors.filter((e) => e.startsWith(`${fileOf(b)}:`))).toEqual([]);
  });

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

describe('README install lines', () => {
  it('pins @nestjs/testing to the Nest major the examples are tested with (a plain install takes the next major, which npm refuses)', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    const installs = [...readme.matchAll(/^npm install --save-dev (.*)$/gm)].map((m) => m[1]);
    const testing = installs
      .map((line) => line.split('#')[0].trim().split(/\s+/))
      .flat()
      .filter((w) => w.startsWith('@nestjs/testing'));
    expect(testing).toEqual([`@nestjs/testing@${pkg.devDependencies['@nestjs/common'].split('.')[0]}`]);
  });
});
