import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';

/** The user the app's authentication puts on the request (`req.user`, as Passport does). */
export interface SampleUser {
  readonly name: string;
  readonly roles: readonly string[];
}

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * Stands in for your app's own authentication (Passport's AuthGuard('jwt'), a session guard):
 * it decides who the request is from and sets `req.user`. This demo has no login, so it signs in
 * requests from this machine as an operator, and nobody else (403). Replace it with your own:
 * never trust a header the client sends (`x-role: admin`) to say who it is.
 */
@Injectable()
export class SampleAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ socket?: { remoteAddress?: string }; user?: SampleUser }>();
    if (!LOOPBACK.has(req.socket?.remoteAddress ?? '')) return false;
    req.user = { name: 'local-operator', roles: ['queue-reader', 'queue-admin'] };
    return true;
  }
}

/** The dashboard shows every payload: only users with a queue role see it at all. */
@Injectable()
export class QueueReaderGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const user = context.switchToHttp().getRequest<{ user?: SampleUser }>().user;
    return user?.roles.includes('queue-reader') === true;
  }
}

/** Actions (retry, cancel, remove, pause, enqueue) need the admin role; reads the reader role (the guards). */
export function mayUseDashboard(req: { user?: unknown }, action: string): boolean {
  const user = req.user as SampleUser | undefined;
  return action === 'read' || user?.roles.includes('queue-admin') === true;
}
