import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { brokenLinks, githubRepository, markdownPages, parseMarkdown, ROOT } from '../support/markdown';

/** The repository's own absolute URLs, as package.json names it. */
const BLOB = `https://github.com/${githubRepository()}/blob/main/`;
const RAW = `https://raw.githubusercontent.com/${githubRepository()}/main/`;

describe('links of README.md and docs/', () => {
  it('resolve: every relative link to a file of the repository, every #anchor to a heading', () => {
    const pages = markdownPages();
    expect(pages).toContain('README.md');
    expect(brokenLinks(pages)).toEqual([]);
  });

  it("finds the same links as the package check's reader of the packed README (scripts/markdown-links.mjs)", () => {
    const pages = markdownPages();
    const texts = pages.map((p) => readFileSync(join(ROOT, p), 'utf8'));
    // An ES module, which Jest's CommonJS runtime cannot load: read in a Node child.
    const script =
      "import { markdownLinks } from './scripts/markdown-links.mjs'; let s = ''; for await (const c of process.stdin) s += c;" +
      'process.stdout.write(JSON.stringify(JSON.parse(s).map(markdownLinks)));';
    const theirs = JSON.parse(
      execFileSync(process.execPath, ['--input-type=module', '-e', script], {
        cwd: ROOT,
        input: JSON.stringify(texts),
        encoding: 'utf8',
      }),
    ) as unknown[];
    expect(theirs).toEqual(texts.map((t) => parseMarkdown(t).links));
    expect(theirs.flat().length).toBeGreaterThan(0);
  });

  describe('the checker', () => {
    let root: string;
    const write = (files: Record<string, string>) => {
      for (const [name, text] of Object.entries(files)) {
        mkdirSync(dirname(join(root, name)), { recursive: true });
        writeFileSync(join(root, name), text);
      }
    };
    beforeEach(() => {
      root = mkdtempSync(join(tmpdir(), 'pgq-links-'));
    });
    afterEach(() => rmSync(root, { recursive: true, force: true }));

    it('accepts links that resolve, by GitHub slugs, explicit anchors and the repository URLs', () => {
      write({
        'README.md': [
          '# Title',
          'See [config](docs/configuration.md#forroot-options), [same page](#title),',
          '[code](`not a link`) `[x](nowhere.md)` and [again](#notes-1).',
          `[abs](${BLOB}docs/configuration.md#progress-jobupdateprogress)`,
          `![shot](${RAW}docs/shot.png)`,
          '<img src="docs/shot.png"> [api](docs/api/classes/Queue.md) [out](https://example.com/x#y)',
          '## Notes',
          '## Notes',
          '```ts',
          '// [inside a fence](missing.md)',
          '```',
          '[ref]: docs/configuration.md#custom',
        ].join('\n'),
        'docs/configuration.md': [
          '# Configuration',
          '## `forRoot` options',
          '## Progress (`job.updateProgress`)',
          '<a id="custom"></a>',
          '[back](../README.md#notes)',
        ].join('\n'),
        'docs/shot.png': '',
      });
      expect(brokenLinks(markdownPages(root), root)).toEqual([]);
    });

    it('finds a planted broken link, a missing anchor on the page and on another page', () => {
      write({
        'README.md': [
          '# Title',
          '[gone](docs/missing.md)',
          '[anchor](#no-such-heading)',
          '[other](docs/page.md#nope)',
          `[abs](${BLOB}docs/gone.md)`,
          '<img src="docs/missing.png">',
          '[up](../outside.md)',
        ].join('\n'),
        'docs/page.md': '# Page\n',
      });
      expect(brokenLinks(markdownPages(root), root)).toEqual([
        'README.md:2 docs/missing.md: no such file: docs/missing.md',
        'README.md:3 #no-such-heading: no heading or anchor #no-such-heading in README.md',
        'README.md:4 docs/page.md#nope: no heading or anchor #nope in docs/page.md',
        `README.md:5 ${BLOB}docs/gone.md: no such file: docs/gone.md`,
        'README.md:6 docs/missing.png: no such file: docs/missing.png',
        'README.md:7 ../outside.md: points outside the repository',
      ]);
    });

    it('reads headings as GitHub renders them', () => {
      expect(
        parseMarkdown('## Dashboard (`nestjs-pg-queue/dashboard`)\nText\n===\n# [Link](x.md) *em* snake_case {#own}').headings,
      ).toEqual(['Dashboard (nestjs-pg-queue/dashboard)', 'Text', 'Link em snake_case']);
    });
  });
});
