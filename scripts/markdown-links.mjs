// The link targets of a Markdown text, for scripts/check-package.mjs (the packed README's links).
// The same rules as parseMarkdown() in test/support/markdown.ts, which the docs link check uses;
// test/unit/docs-links.spec.ts checks that the two find the same links on every page.

/** Blanks inline code spans, keeping the columns (a link inside backticks is no link). */
const withoutCode = (line) => line.replace(/(`+)(?:(?!\1)[\s\S])*?\1/g, (m) => ' '.repeat(m.length));

/** Every link and image target, `{ line, url }` (line 1-based), outside fenced code blocks. */
export function markdownLinks(text) {
  const links = [];
  let fence = null;
  text.split('\n').forEach((raw, i) => {
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
    const at = (url) => links.push({ line: i + 1, url });
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g)) at(m[1]);
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?/.exec(line);
    if (definition) at(definition[1]);
    for (const m of line.matchAll(/<(https?:\/\/[^>\s]+)>/g)) at(m[1]);
    for (const m of line.matchAll(/<[a-zA-Z][^>]*>/g))
      for (const a of m[0].matchAll(/\s(href|src)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) at(a[2] ?? a[3]);
  });
  return links;
}
