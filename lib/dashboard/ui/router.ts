// History API routing under the mount path: every page has its own URL (reload, bookmark and
// share work), and the server answers the same shell HTML for each of them.

import { useEffect, useState } from 'preact/hooks';
import { settings } from './settings';

export type Route =
  | { page: 'overview' }
  | { page: 'queue'; queue: string }
  | { page: 'job'; id: string }
  | { page: 'schedules' }
  | { page: 'nodes' }
  | { page: 'search' }
  | { page: 'missing'; path: string };

/** The route of a path relative to the mount point ('' or '/...'). */
export function match(rel: string): Route {
  const path = rel.replace(/\/+$/, '');
  if (path === '') return { page: 'overview' };
  if (path === '/schedules') return { page: 'schedules' };
  if (path === '/nodes') return { page: 'nodes' };
  if (path === '/search') return { page: 'search' };
  let m = /^\/queues\/([^/]+)$/.exec(path);
  if (m) return { page: 'queue', queue: decodeURIComponent(m[1]) };
  m = /^\/jobs\/([^/]+)$/.exec(path);
  if (m) return { page: 'job', id: decodeURIComponent(m[1]) };
  return { page: 'missing', path };
}

/** An absolute href for a path relative to the mount point. */
export const href = (rel: string): string => settings.base + rel;

const listeners = new Set<() => void>();
const notify = (): void => listeners.forEach((l) => l());
window.addEventListener('popstate', notify);

export function navigate(rel: string, opts: { replace?: boolean } = {}): void {
  const target = href(rel);
  if (target === location.pathname + location.search) return;
  if (opts.replace) history.replaceState(null, '', target);
  else history.pushState(null, '', target);
  if (!opts.replace) window.scrollTo(0, 0);
  notify();
}

export interface Location {
  route: Route;
  query: URLSearchParams;
}

function current(): Location {
  const p = location.pathname.startsWith(settings.base) ? location.pathname.slice(settings.base.length) : location.pathname;
  return { route: match(p), query: new URLSearchParams(location.search) };
}

/** The current route; re-renders on navigation. */
export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const l = (): void => setLoc(current());
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return loc;
}

/** A query string from the non-empty entries. */
export function qs(params: Record<string, string | null | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) p.set(k, v);
  const s = p.toString();
  return s ? '?' + s : '';
}

/** Click handler for in-app links: plain left clicks route in place, others act as the browser does. */
export function onLinkClick(e: MouseEvent): void {
  const a = (e.currentTarget as HTMLAnchorElement | null) ?? null;
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const url = new URL(a.href);
  if (url.origin !== location.origin || !url.pathname.startsWith(settings.base)) return;
  e.preventDefault();
  navigate(url.pathname.slice(settings.base.length) + url.search);
}
