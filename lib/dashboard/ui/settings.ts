// What the server tells the pages, in <meta> tags of the shell HTML (no inline script: the CSP
// is script-src 'self').

function meta(name: string): string | null {
  return document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? null;
}

function basePath(): string {
  const raw = meta('pgq-base') ?? '/queues';
  return raw.endsWith('/') ? raw.slice(0, -1) : raw;
}

const refresh = Number(meta('pgq-refresh-ms'));

export const settings = {
  /** Mount path, without a trailing slash (e.g. '/queues'). */
  base: basePath(),
  /** How often the pages poll their read. */
  refreshMs: Number.isFinite(refresh) && refresh >= 250 ? refresh : 2000,
  /** No action buttons at all. */
  readOnly: meta('pgq-read-only') === 'true',
  title: meta('pgq-title') ?? 'nestjs-pg-queue',
};
