import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';

const LOOPBACK = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/**
 * The sample's dashboard guard: only requests from this machine get in (403 otherwise). The
 * sample listens on 127.0.0.1 anyway; this shows where a real app puts its own check (a session,
 * a role), since the dashboard shows every payload and can act on every job. Not for production
 * as is: behind a reverse proxy on the same host, every request comes from loopback.
 */
@Injectable()
export class LocalOnlyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ socket?: { remoteAddress?: string } }>();
    return LOOPBACK.has(req.socket?.remoteAddress ?? '');
  }
}
