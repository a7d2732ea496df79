/** Where the CLI writes and what it asks: process streams in bin.ts, buffers in tests. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Stdin is a terminal: a destructive command may ask before it runs. */
  readonly interactive: boolean;
  /** Asks a yes/no question on the terminal; true for yes. */
  confirm(question: string): Promise<boolean>;
}

/** `850ms`, `42s`, `4m 10s`, `2h 5m`, `3d 4h`: the two largest units. */
export function humanDuration(ms: number | null): string {
  if (ms === null) return '-';
  const t = Math.max(0, Math.round(ms));
  if (t < 1000) return `${t}ms`;
  const parts: [number, string][] = [
    [Math.floor(t / 86_400_000), 'd'],
    [Math.floor(t / 3_600_000) % 24, 'h'],
    [Math.floor(t / 60_000) % 60, 'm'],
    [Math.floor(t / 1000) % 60, 's'],
  ];
  const first = parts.findIndex(([n]) => n > 0);
  return parts
    .slice(first, first + 2)
    .filter(([n], i) => i === 0 || n > 0)
    .map(([n, u]) => `${n}${u}`)
    .join(' ');
}

/** A timestamp as `2026-12-03 08:13:05Z` (UTC, to the second), or `-`. */
export function humanTime(d: Date | string | null | undefined): string {
  if (d === null || d === undefined) return '-';
  return new Date(d)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

/** `4m 10s ago` against `now`, or `-`. */
export function ago(d: Date | string | null | undefined, now = Date.now()): string {
  if (d === null || d === undefined) return '-';
  const ms = now - new Date(d).getTime();
  return ms >= 0 ? `${humanDuration(ms)} ago` : `in ${humanDuration(-ms)}`;
}

/**
 * An aligned table: a header row and rows of cells, two spaces between columns; columns listed
 * in `right` (numbers) are right-aligned.
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[], right: readonly number[] = []): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (right.includes(i) ? c.padStart(widths[i]) : i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** JSON for `--json`: Dates as ISO strings, two-space indented. */
export function toJson(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
