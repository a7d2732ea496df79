// Times and numbers as an operator reads them: relative ("3 min ago") with the absolute
// timestamp beside or on hover, durations in the largest sensible unit.

export function duration(ms: number): string {
  const a = Math.abs(ms);
  if (a < 1000) return `${Math.round(a)} ms`;
  if (a < 10_000) return `${(Math.floor(a / 100) / 10).toFixed(1)} s`;
  const s = Math.floor(a / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  const m = Math.floor(s / 60);
  if (m < 48 * 60) return `${Math.floor(m / 60)} h ${m % 60} min`;
  const h = Math.floor(m / 60);
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** "12 s ago" / "in 3 min" for an ISO time, relative to `now`. */
export function relative(iso: string, now: number): string {
  const d = Date.parse(iso) - now;
  if (Number.isNaN(d)) return iso;
  if (Math.abs(d) < 1000) return 'now';
  return d < 0 ? `${duration(-d)} ago` : `in ${duration(d)}`;
}

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

/** Local wall-clock time with the UTC offset: 2026-12-01 09:41:16.123 +01:00. */
export function absolute(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)} ` +
    `${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`
  );
}

export const num = (n: number | null | undefined): string => (n == null ? '–' : n.toLocaleString('en-US'));

/** JSON for a <pre>, two-space indented; undefined shows as nothing. */
export function pretty(v: unknown): string {
  if (v === undefined) return '';
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

/** One-line JSON cut to `max` characters, for table cells. */
export function compact(v: unknown, max = 80): string {
  const s = v === undefined ? '' : (JSON.stringify(v) ?? '');
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}
