import {
  ForbiddenException,
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  SetMetadata,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import {
  PG_QUEUE_DASHBOARD_OPTIONS,
  type DashboardAction,
  type DashboardRequest,
  type ResolvedDashboardOptions,
} from './dashboard.options';

const ACTION = 'nestjs-pg-queue:dashboard-action';

/** Marks a route with the action `authorize` is asked about. */
export const DashboardRoute = (action: DashboardAction): MethodDecorator => SetMetadata(ACTION, action);

/** The header every action must carry: a cross-site HTML form cannot set it, nor send JSON. */
export const ACTION_HEADER = 'x-pgqueue-dashboard';

function header(req: DashboardRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Runs after the app's guards on every dashboard route: actions need the custom header and a
 * JSON body (else 400 / 415), are refused in read-only mode (403), and every request goes
 * through `authorize` when one is given (false: 403).
 */
@Injectable()
export class DashboardAccessGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    @Inject(PG_QUEUE_DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const action = this.reflector.get<DashboardAction | undefined>(ACTION, context.getHandler()) ?? 'read';
    const req = context.switchToHttp().getRequest<DashboardRequest>();
    if (action !== 'read') {
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
      if (this.options.readOnly)
        throw new ForbiddenException({ error: `The dashboard is read-only (readOnly: true): "${action}" is not allowed.` });
    }
    if (this.options.authorize && !(await this.options.authorize(req, action))) {
      throw new ForbiddenException({ error: `Not allowed: authorize() refused "${action}".` });
    }
    return true;
  }
}
