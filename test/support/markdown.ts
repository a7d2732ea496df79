import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';

// Links and headings of the Markdown pages, for the link check (test/unit/docs-links.spec.ts).
// Slugs follow GitHub's rules through github-slugger, as the docs site's VitePress config does,
// so an anchor that passes here works on GitHub, on npm and on the site.

export const ROOT = join(__dirname, '..', '..');

/** `owner/name` of the GitHub repository package.json's `repository` names (the one place it is written). */
export function githubRepository(root: string = ROOT): string {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { repository?: { url?: string } };
  const m = /^git\+https:\/\/github\.com\/([\w.-]+\/[\w.-]+?)\.git$/.exec(pkg.repository?.url ?? '');
  if (!m) throw new Error(`package.json "repository.url" is not git+https://github.com/<owner>/<name>.git`);
  return m[1];
}

/**
 * The prefixes under which a page links to this repository's own files with an absolute URL (the
 * README must, to work on npm): the checker maps them back to the local file.
 */
export const REPO_FILE_PREFIXES = [
  `https://github.com/${githubRepository()}/blob/main/`,
  `https://github.com/${githubRepository()}/tree/main/`,
  `https://raw.githubusercontent.com/${githubRepository()}/main/`,
];

/** Generated at build time by TypeDoc and git-ignored: links into it are allowed, not resolved. */
export const GENERATED_DIRS = ['docs/api/'];

/** A link (or image) target as written, and the line it is on (1-based). */
export interface MarkdownLink {
  readonly line: number;
  readonly url: string;
}

/** What the checker reads of a page: its links, its headings' text, and its explicit anchors. */
export interface ParsedMarkdown {
  readonly links: MarkdownLink[];
  /** Each heading's text as GitHub slugs it (inline markup removed), in page order. */
  readonly headings: string[];
  /** Anchors set by hand: `<a id="x">`, `<a name="x">`, any HTML `id="x"`, a heading's `{#x}`. */
  readonly ids: string[];
}

/** Blanks inline code spans, keeping the columns (a link inside backticks is no link). */
const withoutCode = (line: string): string => line.replace(/(`+)(?:(?!\1)[\s\S])*?\1/g, (m) => ' '.repeat(m.length));

/** A heading's rendered text: what github-slugger is given. */
function headingText(raw: string): string {
  return raw
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/`/g, '') // code spans keep their text
    .replace(/\*\*|\*/g, '')
    .replace(/(^|[^\w])__?(\S(?:.*?\S)?)__?(?=[^\w]|$)/g, '$1$2') // _emphasis_, not snake_case
    .trim();
}

export function parseMarkdown(text: string): ParsedMarkdown {
  const links: MarkdownLink[] = [];
  const headings: string[] = [];
  const ids: string[] = [];
  const lines = text.split('\n');
  let fence: string | null = null;
  lines.forEach((raw, i) => {
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(raw);
    if (fence !== null) {
      if (open && open[1][0] === fence[0] && open[1].length >= fence.length && raw.trim() === open[1]) fence = null;
      return;
    }
    if (open) {
      fence = open[1];
      return;
    }
    const line = withoutCode(raw);
    const at = (url: string) => links.push({ line: i + 1, url });
    const atx = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(raw);
    const setext = i + 1 < lines.length && /^ {0,3}(=+|-+)\s*$/.test(lines[i + 1]) && /\S/.test(raw) && !/^\s*[-*+>|]/.test(raw);
    const heading = atx ? atx[1] : setext ? raw.trim() : null;
    if (heading !== null) {
      const custom = /\s*\{#([\w-]+)\}\s*$/.exec(heading);
      if (custom) ids.push(custom[1]);
      headings.push(headingText(custom ? heading.slice(0, custom.index) : heading));
    }
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)) at(m[1]);
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?/.exec(line);
    if (definition) at(definition[1]);
    for (const m of line.matchAll(/<(https?:\/\/[^>\s]+)>/g)) at(m[1]);
    for (const m of line.matchAll(/<[a-zA-Z][^>]*>/g)) {
      for (const a of m[0].matchAll(/\s(href|src|id|name)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) {
        const value = a[2] ?? a[3];
        if (a[1] === 'href' || a[1] === 'src') at(value);
        else if (a[1] === 'id' || /^<a\s/i.test(m[0])) ids.push(value);
      }
    }
  });
  return { links, headings, ids };
}

/**
 * github-slugger's slugs of each page's headings (a fresh slugger per page, so a repeated heading
 * gets `-1`, `-2` as on GitHub). github-slugger is ESM only, which Jest's CommonJS runtime cannot
 * load: one Node child computes every page's slugs at once.
 */
export function githubSlugs(pages: readonly (readonly string[])[]): string[][] {
  const script =
    "import GithubSlugger from 'github-slugger'; let s = ''; for await (const c of process.stdin) s += c;" +
    'process.stdout.write(JSON.stringify(JSON.parse(s).map((hs) => { const g = new GithubSlugger(); return hs.map((h) => g.slug(h)); })));';
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: ROOT,
    input: JSON.stringify(pages),
    encoding: 'utf8',
  });
  return JSON.parse(out) as string[][];
}

/** README.md and every docs/**.md page but the generated reference and dot-folders, relative to `root`. */
export function markdownPages(root: string = ROOT): string[] {
  const pages = existsSync(join(root, 'README.md')) ? ['README.md'] : [];
  const walk = (dir: string): void => {
    if (!existsSync(join(root, dir))) return;
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      // Not node_modules, the generated reference, nor the site's own folder (docs/.vitepress: config, cache, build).
      if (entry.name === 'node_modules' || entry.name.startsWith('.') || GENERATED_DIRS.includes(`${rel}/`)) continue;
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.md')) pages.push(rel);
    }
  };
  walk('docs');
  return pages.sort();
}

const isExternal = (url: string): boolean => /^[a-z][a-z\d+.-]*:/i.test(url) || url.startsWith('//');

/**
 * The repository path a link points at, relative to `root` (with its `#anchor`), or null for a
 * link out of the repository. `from` is the page's own path. A path outside `root` stays as it is
 * (`../x`), which no check accepts.
 */
export function localTarget(url: string, from: string): { path: string; anchor: string | null } | null {
  let rest: string;
  let base: string;
  const prefix = REPO_FILE_PREFIXES.find((p) => url.startsWith(p));
  if (prefix) {
    rest = url.slice(prefix.length);
    base = '';
  } else if (isExternal(url)) {
    return null;
  } else {
    rest = url;
    base = url.startsWith('/') ? '' : posix.dirname(from);
  }
  const hash = rest.indexOf('#');
  const anchor = hash === -1 ? null : decodeURIComponent(rest.slice(hash + 1));
  const file = decodeURIComponent((hash === -1 ? rest : rest.slice(0, hash)).replace(/\?.*$/, ''));
  if (file === '') return { path: from, anchor };
  return { path: posix.normalize(posix.join(base, file.replace(/^\//, ''))).replace(/\/$/, ''), anchor };
}

/**
 * Every broken link of `pages` (paths relative to `root`), one line each:
 * `<page>:<line> <url>: <why>`. A relative link (or one under {@link REPO_FILE_PREFIXES}) must name
 * a file or folder of the repository; its `#anchor`, on a Markdown page, must be a heading's slug
 * or an explicit anchor of that page. Links into {@link GENERATED_DIRS} are not resolved.
 */
export function brokenLinks(pages: readonly string[] = markdownPages(), root: string = ROOT): string[] {
  const parsed = new Map<string, ParsedMarkdown>();
  const read = (page: string): ParsedMarkdown => {
    let p = parsed.get(page);
    if (!p) parsed.set(page, (p = parseMarkdown(readFileSync(join(root, page), 'utf8'))));
    return p;
  };
  pages.forEach(read);
  // Anchors of every page a link reaches: the pages themselves and the other .md files they link.
  const targets = new Map<string, { path: string; anchor: string | null } | null>();
  for (const page of pages) for (const l of read(page).links) targets.set(`${page}\n${l.url}`, safeTarget(l.url, page));
  const mdTargets = new Set(
    [...targets.values()].flatMap((t) =>
      t && t.path.endsWith('.md') && isFile(join(root, t.path)) && !isGenerated(t.path) ? [t.path] : [],
    ),
  );
  for (const page of mdTargets) read(page);
  const names = [...parsed.keys()];
  const slugs = githubSlugs(names.map((n) => parsed.get(n)!.headings));
  const anchors = new Map(names.map((n, i) => [n, new Set([...slugs[i], ...parsed.get(n)!.ids])]));

  const problems: string[] = [];
  for (const page of pages) {
    for (const l of read(page).links) {
      const t = targets.get(`${page}\n${l.url}`);
      const say = (why: string) => problems.push(`${page}:${l.line} ${l.url}: ${why}`);
      if (t === undefined) continue;
      if (t === null) {
        if (!isExternal(l.url)) say('not a valid link');
        continue;
      }
      if (t.path.startsWith('../') || t.path === '..') {
        say('points outside the repository');
        continue;
      }
      if (isGenerated(t.path)) continue;
      if (!existsSync(join(root, t.path))) {
        say(`no such file: ${t.path}`);
        continue;
      }
      if (t.anchor === null || t.anchor === '' || !t.path.endsWith('.md')) continue;
      if (!anchors.get(t.path)?.has(t.anchor)) say(`no heading or anchor #${t.anchor} in ${t.path}`);
    }
  }
  return problems;
}

function safeTarget(url: string, from: string): { path: string; anchor: string | null } | null {
  try {
    return localTarget(url, from);
  } catch {
    return null; // malformed %-escape: reported as not a valid link
  }
}

const isGenerated = (path: string): boolean => GENERATED_DIRS.some((d) => `${path}/`.startsWith(d));

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
