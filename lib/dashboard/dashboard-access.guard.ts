import {
  ForbiddenException,
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  NotFoundException,
  SetMetadata,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { HttpAdapterHost, Reflector } from '@nestjs/core';
import { parseConnection, parseIdsBody, parseIdsConnection, parseJobId, parseQueue } from './dashboard-input';
import {
  actionFilterOf,
  actionName,
  crossSiteReason,
  header,
  listFilterOf,
  spellsRouteExactly,
  type DashboardRouteSpec,
  type RoutedRequest,
} from './dashboard-request';
import { PG_QUEUE_DASHBOARD_OPTIONS, type DashboardAccessContext, type ResolvedDashboardOptions } from './dashboard.options';
import { DashboardService } from './dashboard.service';

const ROUTE = 'nestjs-pg-queue:dashboard-route';

/** Marks a route with what it does and names; a route without it serves GET and HEAD only (fail closed). */
export const DashboardRoute = (
  action: DashboardRouteSpec['action'],
  scope: DashboardRouteSpec['scope'] = 'dashboard',
  api = true,
): MethodDecorator => SetMetadata(ROUTE, { action, scope, api } satisfies DashboardRouteSpec);

/** The header every action must carry: a cross-site HTML form cannot set it, nor send JSON. */
export const ACTION_HEADER = 'x-pgqueue-dashboard';

/** What an untagged GET or HEAD is: a read of the whole dashboard. */
const UNTAGGED_READ: DashboardRouteSpec = { action: 'read', scope: 'dashboard', api: false };

/**
 * Runs after the app's guards on every dashboard route: the path must be spelled exactly (else
 * 404); API answers get `no-store` and `nosniff`; actions need the custom header, a JSON body and
 * a same-site origin (else 400 / 415 / 403), are refused in read-only mode (403), and every
 * request goes through `authorize` when one is given (false: 403), with what it touches.
 */
@Injectable()
export class DashboardAccessGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    @Inject(PG_QUEUE_DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    @Inject(DashboardService) private readonly svc: DashboardService,
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<RoutedRequest>();
    const tagged = this.reflector.get<DashboardRouteSpec | undefined>(ROUTE, context.getHandler());
    const method = (req.method ?? 'GET').toUpperCase();
    if (!tagged && method !== 'GET' && method !== 'HEAD') {
      throw new ForbiddenException({ error: `This dashboard route has no access rule, so ${method} is refused.` });
    }
    const spec = tagged ?? UNTAGGED_READ;
    if (!spellsRouteExactly(req))
      throw new NotFoundException({ error: 'Not found: dashboard paths are case-sensitive and not percent-encoded.' });
    if (spec.api) {
      const res = context.switchToHttp().getResponse<unknown>();
      this.adapterHost.httpAdapter.setHeader(res, 'Cache-Control', 'no-store');
      this.adapterHost.httpAdapter.setHeader(res, 'X-Content-Type-Options', 'nosniff');
    }
    if (spec.action !== 'read') this.checkAction(req, spec.action);
    if (!this.options.authorize) return true;
    const ctx = await this.contextOf(spec, req);
    const action = actionName(spec, ctx.ids);
    if (!(await this.options.authorize(req, action, ctx))) {
      throw new ForbiddenException({ error: `Not allowed: authorize() refused "${action}".` });
    }
    return true;
  }

  private checkAction(req: RoutedRequest, action: string): void {
    if (header(req, ACTION_HEADER) !== '1') {
      throw new HttpException(
        { error: `Dashboard actions need the header "X-PgQueue-Dashboard: 1" (a cross-site form cannot send it).` },
        HttpStatus.BAD_REQUEST,
      );
    }
    if (!/^application\/json\s*(;|$)/i.test(header(req, 'content-type') ?? '')) {
      throw new HttpException(
        { error: 'Dashboard actions take a JSON body: send "Content-Type: application/json".' },
        HttpStatus.UNSUPPORTED_MEDIA_TYPE,
      );
    }
    const crossSite = crossSiteReason(req);
    if (crossSite) {
      throw new ForbiddenException({
        error: `Dashboard actions are refused from another site (${crossSite}): act from the dashboard's own pages, or without a browser.`,
      });
    }
    if (this.options.readOnly)
      throw new ForbiddenException({ error: `The dashboard is read-only (readOnly: true): "${action}" is not allowed.` });
  }

  /** What the request touches; bad parameters answer 400 here as they would in the route. */
  private async contextOf(spec: DashboardRouteSpec, req: RoutedRequest): Promise<DashboardAccessContext> {
    const none = { queue: null, queues: [], connection: null, ids: [], filter: null };
    if (spec.scope === 'queue') {
      const queue = parseQueue(req.params?.queue);
      const filter = spec.action === 'read' ? listFilterOf(req.query) : actionFilterOf(req.body);
      return { ...none, queue, queues: [queue], connection: this.svc.connectionOfQueue(queue), filter };
    }
    if (spec.scope === 'job' || spec.scope === 'ids') {
      const ids = spec.scope === 'job' ? [parseJobId(req.params?.id)] : parseIdsBody(req.body);
      const connection = spec.scope === 'job' ? parseConnection(req.query?.connection) : parseIdsConnection(req.body);
      return { ...none, ids, connection, queues: await this.svc.queuesOf(ids, connection) };
    }
    return none;
  }
}
