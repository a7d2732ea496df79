import type { DashboardAction, DashboardRequest } from './dashboard.options';

/**
 * What a dashboard route is, for DashboardAccessGuard: the action `authorize` is asked about,
 * what the request names (the whole dashboard, a queue, a job, job ids), and whether it is an
 * API answer (no-store, nosniff) rather than a page or an asset.
 */
export interface DashboardRouteSpec {
  /** The route's action; its `-bulk` form is added below when a request names several ids. */
  readonly action: Exclude<DashboardAction, `${string}-bulk`>;
  readonly scope: 'dashboard' | 'queue' | 'job' | 'ids';
  readonly api: boolean;
}

/** A request with what the guard reads beyond DashboardRequest; Express and Fastify both fill these. */
export type RoutedRequest = DashboardRequest & {
  readonly originalUrl?: string;
  readonly params?: Record<string, unknown>;
  readonly query?: Record<string, unknown>;
  readonly body?: unknown;
  /** Express: the matched route, its pattern in `path`. */
  readonly route?: { readonly path?: unknown };
  /** Fastify 4.10+ and 5: the matched route's pattern in `url`. */
  readonly routeOptions?: { readonly url?: unknown };
  /** Fastify before 4.10. */
  readonly routerPath?: unknown;
};

export function header(req: DashboardRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The pattern the platform matched the request with (`/queues/api/jobs/:id`), or null when it does not say. */
function routePattern(req: RoutedRequest): string | null {
  for (const p of [req.route?.path, req.routeOptions?.url, req.routerPath]) if (typeof p === 'string') return p;
  return null;
}

/**
 * Whether the request's path, as sent, spells the route's literal segments exactly. Express
 * matches routes case-insensitively (`/Queues/api/overview`) and Fastify decodes before matching
 * (`/%71ueues/api/overview`): a reverse proxy that guards `/queues` passes both on. Parameters
 * (`:id`) match any segment; one trailing '/' is allowed, as both platforms allow it.
 */
export function spellsRouteExactly(req: RoutedRequest): boolean {
  const pattern = routePattern(req);
  const raw = (req.originalUrl ?? req.url ?? '').split('?')[0];
  if (pattern === null) return true;
  const want = pattern.split('/');
  const got = raw.split('/');
  if (got.length === want.length + 1 && got[got.length - 1] === '') got.pop();
  if (got.length !== want.length) return false;
  return want.every((seg, i) => seg.startsWith(':') || seg === got[i]);
}

/**
 * Why an action must be refused as coming from another site, or null. Browsers send
 * `Sec-Fetch-Site` (and script cannot set it): only `same-origin` (and `none`, a user's own
 * navigation) pass. Without it, an `Origin` must name this host. A request with neither is not a
 * browser's (curl, a script) and passes: the custom header already keeps HTML forms out, and
 * this keeps out the pages of other sites an app's CORS setting may let send it.
 */
export function crossSiteReason(req: DashboardRequest): string | null {
  const site = header(req, 'sec-fetch-site');
  if (site !== undefined) return site === 'same-origin' || site === 'none' ? null : `Sec-Fetch-Site: ${site}`;
  const origin = header(req, 'origin');
  if (origin === undefined) return null;
  let host: string | null = null;
  try {
    host = new URL(origin).host;
  } catch {
    // "null" (a sandboxed frame, a file) or garbage: not this site.
  }
  return host !== null && host === header(req, 'host') ? null : `Origin: ${origin.slice(0, 200)}`;
}

/** The action name `authorize` is asked about: an action on several ids has its own. */
export function actionName(spec: DashboardRouteSpec, ids: readonly string[]): DashboardAction {
  if (spec.scope === 'ids' && ids.length > 1) return `${spec.action as 'retry' | 'cancel' | 'remove' | 'promote'}-bulk`;
  return spec.action;
}

/**
 * The filter an action on a queue names in its body (retry-all's and promote-all's `name`, the
 * `state` and `name` of an action over matching jobs, clean's `state` and `olderThanMs`), as
 * strings; null when it names none.
 */
export function actionFilterOf(body: unknown): Record<string, string> | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const out: Record<string, string> = {};
  for (const k of ['state', 'name', 'olderThanMs']) {
    const v = (body as Record<string, unknown>)[k];
    if (typeof v === 'string' || typeof v === 'number') out[k] = String(v);
  }
  return Object.keys(out).length ? out : null;
}

/** The list filter of a jobs read: its string query parameters but the cursor and limit. */
export function listFilterOf(query: Record<string, unknown> | undefined): Record<string, string> | null {
  const out: Record<string, string> = {};
  for (const k of ['state', 'name', 'uniqueKey', 'payload', 'group', 'olderThanMs']) {
    const v = query?.[k];
    if (typeof v === 'string' && v !== '') out[k] = v;
  }
  return Object.keys(out).length ? out : null;
}
