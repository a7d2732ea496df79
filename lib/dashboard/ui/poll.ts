// Live updates by short polling (DASHBOARD.md "Live updates"): each page refetches its one read
// every refreshMs while refresh is on and the tab is visible. The last good answer stays on
// screen while the next one loads, so a refresh never blanks or shifts the page.

import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, get } from './api';
import { settings } from './settings';

interface RefreshState {
  paused: boolean;
  /** Date.now() of the page read's last good answer. */
  updatedAt: number | null;
  /** Message of the last failed read, cleared by the next good one. */
  error: string | null;
}

let state: RefreshState = { paused: false, updatedAt: null, error: null };
const listeners = new Set<() => void>();
function set(patch: Partial<RefreshState>): void {
  state = { ...state, ...patch };
  listeners.forEach((l) => l());
}

export function setPaused(paused: boolean): void {
  set({ paused });
}

/** The refresh state, for the header's "updated 3 s ago" and pause toggle. */
export function useRefreshState(): RefreshState {
  const [, force] = useState(0);
  useEffect(() => {
    const l = (): void => force((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return state;
}

/** Re-renders every `ms` (relative times). */
export function useTick(ms = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}

export interface Polled<T> {
  data: T | null;
  error: ApiError | null;
  /** True while `data` belongs to an earlier path (a new one is loading). */
  stale: boolean;
  /** Refetch now (after an action). */
  reload: () => Promise<void>;
}

/** Fetches GET {base}/api{path} now and every refreshMs; `null` path fetches nothing. */
export function usePoll<T>(path: string | null): Polled<T> {
  const [data, setData] = useState<{ path: string; value: T } | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const pathRef = useRef(path);
  pathRef.current = path;
  const inflight = useRef<AbortController | null>(null);
  const { paused } = useRefreshState();

  const load = useCallback(async (): Promise<void> => {
    const p = pathRef.current;
    if (p === null) return;
    inflight.current?.abort();
    const ctl = new AbortController();
    inflight.current = ctl;
    try {
      const value = await get<T>(p, ctl.signal);
      if (pathRef.current !== p) return;
      setData({ path: p, value });
      setError(null);
      set({ updatedAt: Date.now(), error: null });
    } catch (err) {
      if ((err as Error).name === 'AbortError' || pathRef.current !== p) return;
      const e = err instanceof ApiError ? err : new ApiError(0, String((err as Error).message ?? err));
      setError(e);
      set({ error: e.message });
    }
  }, []);

  useEffect(() => {
    setError(null);
    void load();
    return () => inflight.current?.abort();
  }, [path, load]);

  useEffect(() => {
    if (paused || path === null) return;
    const t = setInterval(() => {
      if (document.visibilityState === 'visible') void load();
    }, settings.refreshMs);
    const onVisible = (): void => {
      if (document.visibilityState === 'visible') void load();
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      clearInterval(t);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [paused, path, load]);

  return { data: data?.value ?? null, error, stale: data !== null && data.path !== path, reload: load };
}
