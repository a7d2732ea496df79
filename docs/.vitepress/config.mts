// The docs site (VitePress): `npm run docs:build` (scripts/build-docs.mjs: the TypeDoc reference
// into docs/api, then this site into docs/.vitepress/dist), `npm run docs:dev`, `npm run docs:preview`.
//
// The pages stay plain GitHub markdown: anchors are GitHub's (github-slugger), links between pages
// are relative `.md` links, and a link to a file outside docs/ (README, CHANGELOG, lib/, bench/)
// becomes its GitHub URL here. A dead link between pages fails the build; test/browser/
// docs-site.browser-spec.ts crawls the built site for 404s and missing #anchors.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { slug } from 'github-slugger';
import { defineConfig, type DefaultTheme, type MarkdownRenderer } from 'vitepress';

export const REPO = 'https://github.com/nestjs-pg-queue/nestjs-pg-queue';

const docsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repoDir = path.dirname(docsDir);

/** The pages in the order of the sidebar (docs-plan); a page not written yet is left out. */
export const SECTIONS: readonly { text: string; pages: readonly string[] }[] = [
  {
    text: 'Guide',
    pages: [
      'index',
      'getting-started',
      'quick-start',
      'configuration',
      'producing',
      'processing',
      'transactions',
      'flows',
      'steps',
      'recurring-jobs',
      'flow-control',
      'groups',
      'events',
      'progress',
      'tracing',
      'health-and-metrics',
      'dashboard',
      'testing',
      'dashboard-api',
    ],
  },
  {
    text: 'Operating it',
    pages: [
      'managing-jobs',
      'cli',
      'multiple-databases',
      'pgbouncer',
      'operations',
      'reliability',
      'how-it-works',
      'errors',
      'troubleshooting',
      'limits',
      'security',
      'migrating-from-bullmq',
      'benchmarks',
      'development',
    ],
  },
];

/** A page's title: its first `# ` heading outside code fences, else its file name. */
function titleOf(file: string): string {
  let fence: string | null = null;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const f = /^\s*(`{3,}|~{3,})/.exec(line);
    if (f) fence = fence === null ? f[1] : line.trim().startsWith(fence) ? null : fence;
    else if (fence === null && line.startsWith('# ')) return line.slice(2).trim();
  }
  return path.basename(file, '.md');
}

/** Every docs/*.md at the top level the sidebar does not list yet: shown last, never hidden. */
function unlisted(): string[] {
  const listed = new Set(SECTIONS.flatMap((s) => s.pages));
  return fs
    .readdirSync(docsDir)
    .filter((f) => f.endsWith('.md') && !listed.has(f.slice(0, -3)))
    .map((f) => f.slice(0, -3))
    .sort();
}

/** A title's markdown code spans as HTML (the sidebar renders its text as HTML). */
const titleHtml = (title: string) =>
  title
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/`([^`]+)`/g, '<code>$1</code>');

function pageItems(pages: readonly string[]): DefaultTheme.SidebarItem[] {
  return pages
    .filter((p) => fs.existsSync(path.join(docsDir, `${p}.md`)))
    .map((p) => ({ text: titleHtml(titleOf(path.join(docsDir, `${p}.md`))), link: p === 'index' ? '/' : `/${p}` }));
}

/** The entry points' names as an app imports them (TypeDoc names the modules after their folders). */
const MODULE_TITLES: Record<string, string> = { index: 'nestjs-pg-queue' };

/** The reference's sidebar, from typedoc-vitepress-theme's typedoc-sidebar.json (scripts/build-docs.mjs). */
function apiItems(): DefaultTheme.SidebarItem[] {
  const file = path.join(docsDir, 'api', 'typedoc-sidebar.json');
  if (!fs.existsSync(file)) return [];
  const modules = JSON.parse(fs.readFileSync(file, 'utf8')) as DefaultTheme.SidebarItem[];
  const order = (m: DefaultTheme.SidebarItem) => (m.text === 'index' ? '' : (m.text ?? ''));
  return [
    { text: 'Entry points', link: '/api/' },
    ...modules
      .sort((a, b) => order(a).localeCompare(order(b)))
      .map((m) => ({ ...m, text: MODULE_TITLES[m.text ?? ''] ?? `nestjs-pg-queue/${m.text}` })),
  ];
}

function sidebar(): DefaultTheme.SidebarItem[] {
  const groups: DefaultTheme.SidebarItem[] = SECTIONS.map((s) => ({ text: s.text, items: pageItems(s.pages) }));
  const more = pageItems(unlisted());
  if (more.length) groups.push({ text: 'More', items: more });
  groups.push({ text: 'API reference', collapsed: false, items: apiItems() });
  return groups.filter((g) => g.items?.length);
}

/**
 * Links that leave docs/ (../README.md, ../lib/x.ts, ../bench/) and links to files in docs/ that
 * are not pages (a .json, a .png) point at the file on GitHub: they work on GitHub and npm as
 * written, and the site has no copy of them. Runs on the tokens, before VitePress' own link
 * handling, which then treats them as external links.
 */
function repoLinks(md: MarkdownRenderer): void {
  md.core.ruler.push('pgq_repo_links', (state) => {
    const page = state.env?.relativePath as string | undefined;
    if (!page) return;
    const visit = (tokens: typeof state.tokens) => {
      for (const t of tokens) {
        if (t.children) visit(t.children);
        if (t.type !== 'link_open') continue;
        const href = t.attrGet('href');
        if (!href || /^[a-z][a-z0-9+.-]*:|^\/\/|^#|^\//i.test(href)) continue;
        const [, target = '', hash = ''] = /^([^#?]*)(.*)$/.exec(href) ?? [];
        const inRepo = path.posix.normalize(path.posix.join('docs', path.posix.dirname(page), decodeURI(target)));
        if (inRepo.startsWith('../')) continue;
        const isPage = inRepo.startsWith('docs/') && (/\.(md|html)$/.test(inRepo) || !path.posix.extname(inRepo));
        if (isPage) continue;
        const dir = fs.existsSync(path.join(repoDir, inRepo)) && fs.statSync(path.join(repoDir, inRepo)).isDirectory();
        t.attrSet('href', `${REPO}/${dir ? 'tree' : 'blob'}/main/${encodeURI(inRepo.replace(/\/$/, ''))}${hash}`);
      }
    };
    visit(state.tokens);
  });
}

export default defineConfig({
  title: 'nestjs-pg-queue',
  description:
    'A durable job queue for NestJS on the PostgreSQL you already run: transactional enqueue, SKIP LOCKED workers, LISTEN/NOTIFY wake-ups.',
  lang: 'en-US',
  cleanUrls: true,
  lastUpdated: false,
  // A link to a page that does not exist fails `npm run docs:build` (and CI).
  ignoreDeadLinks: false,
  // Not pages: generated or kept for GitHub only.
  srcExclude: ['**/README.md'],
  vite: {
    // The one big chunk is the local search index (700 kB for every page and the reference), which
    // the browser loads only when the search box opens.
    build: { chunkSizeWarningLimit: 2000 },
  },
  markdown: {
    // GitHub's anchors, so `page.md#some-heading` works on GitHub, npm and here alike. markdown-it-anchor
    // adds GitHub's -1, -2 to a repeated heading itself.
    anchor: { slugify: (s: string) => slug(s) },
    headers: { slugify: (s: string) => slug(s) },
    config: (md) => md.use(repoLinks),
  },
  themeConfig: {
    sidebar: sidebar(),
    // The site title links home; until docs/index.md is written, to the first page there is.
    logoLink: fs.existsSync(path.join(docsDir, 'index.md')) ? '/' : (pageItems(SECTIONS[0].pages)[0]?.link ?? '/'),
    nav: [
      { text: 'Guide', link: fs.existsSync(path.join(docsDir, 'getting-started.md')) ? '/getting-started' : '/quick-start' },
      { text: 'API reference', link: '/api/' },
      { text: 'Changelog', link: `${REPO}/blob/main/CHANGELOG.md` },
    ],
    socialLinks: [{ icon: 'github', link: REPO }],
    search: { provider: 'local' },
    outline: { level: [2, 3] },
  },
});
