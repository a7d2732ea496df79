import 'reflect-metadata';
import { ForbiddenException, NotFoundException, type ExecutionContext } from '@nestjs/common';
import { Reflector, type HttpAdapterHost } from '@nestjs/core';
import { DashboardAccessGuard, DashboardRoute } from '../../lib/dashboard/dashboard-access.guard';
import { actionName, crossSiteReason, spellsRouteExactly } from '../../lib/dashboard/dashboard-request';
import { resolveDashboardOptions } from '../../lib/dashboard/dashboard.options';
import type { DashboardService } from '../../lib/dashboard/dashboard.service';

// The guard's own rules, on requests built by hand (no route reaches it untagged today: this is
// what keeps a route added later without its tag from acting). Over HTTP on both platforms:
// test/integration/dashboard-api.int-spec.ts.

class Routes {
  untagged(): void {}
  @DashboardRoute('pause', 'queue')
  tagged(): void {}
}

function contextFor(handler: () => void, req: Record<string, unknown>): ExecutionContext {
  return {
    getHandler: () => handler,
    getClass: () => Routes,
    switchToHttp: () => ({ getRequest: () => ({ headers: {}, ...req }), getResponse: () => ({}) }),
  } as unknown as ExecutionContext;
}

function guard(options = resolveDashboardOptions({ public: true })): DashboardAccessGuard {
  const adapterHost = { httpAdapter: { setHeader: () => undefined } } as unknown as HttpAdapterHost;
  return new DashboardAccessGuard(new Reflector(), options, {} as DashboardService, adapterHost);
}

describe('DashboardAccessGuard', () => {
  const untagged = Routes.prototype.untagged;

  it.each(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])('fails closed: a route without its tag refuses %s', async (method) => {
    await expect(guard().canActivate(contextFor(untagged, { method, url: '/queues/x' }))).rejects.toThrow(ForbiddenException);
  });

  it('a route without its tag still serves GET and HEAD, as a read', async () => {
    const asked: string[] = [];
    const g = guard(resolveDashboardOptions({ authorize: (_r, action) => (asked.push(action), true) }));
    for (const method of ['GET', 'HEAD']) await expect(g.canActivate(contextFor(untagged, { method }))).resolves.toBe(true);
    expect(asked).toEqual(['read', 'read']);
  });

  it('a tagged action still needs its header', async () => {
    await expect(guard().canActivate(contextFor(Routes.prototype.tagged, { method: 'POST' }))).rejects.toMatchObject({
      status: 400,
    });
  });

  it('a path spelled otherwise than the route answers 404', async () => {
    const req = { method: 'GET', originalUrl: '/Queues/api/overview', route: { path: '/queues/api/overview' } };
    await expect(guard().canActivate(contextFor(untagged, req))).rejects.toThrow(NotFoundException);
  });
});

describe('dashboard request rules', () => {
  it('spellsRouteExactly: literal segments as sent, parameters free, one trailing slash, Express and Fastify patterns', () => {
    const ex = (originalUrl: string, path = '/queues/api/jobs/:id') =>
      spellsRouteExactly({ headers: {}, originalUrl, route: { path } });
    const fy = (url: string, pattern = '/queues/api/jobs/:id') =>
      spellsRouteExactly({ headers: {}, url, routeOptions: { url: pattern } });
    expect(ex('/queues/api/jobs/42?connection=a')).toBe(true);
    expect(ex('/queues/api/jobs/42/')).toBe(true);
    expect(ex('/Queues/api/jobs/42')).toBe(false);
    expect(ex('/queues/api/jobs/42//')).toBe(false);
    expect(fy('/queues/api/jobs/%34%32')).toBe(true);
    expect(fy('/%71ueues/api/jobs/42')).toBe(false);
    expect(fy('/queues/api%2Fjobs/42', '/queues/api/jobs/:id')).toBe(false);
    expect(ex('/admin/queues', '/admin/queues')).toBe(true);
    // A platform that names no pattern is not second-guessed.
    expect(spellsRouteExactly({ headers: {}, url: '/Queues' })).toBe(true);
  });

  it('crossSiteReason: Sec-Fetch-Site first, then Origin against Host, and no browser headers pass', () => {
    const r = (headers: Record<string, string>) => crossSiteReason({ headers });
    expect(r({ 'sec-fetch-site': 'same-origin', origin: 'https://x.example' })).toBeNull();
    expect(r({ 'sec-fetch-site': 'none' })).toBeNull();
    expect(r({ 'sec-fetch-site': 'same-site' })).toMatch(/same-site/);
    expect(r({ 'sec-fetch-site': 'cross-site', origin: 'http://h', host: 'h' })).toMatch(/cross-site/);
    expect(r({ origin: 'http://h:3000', host: 'h:3000' })).toBeNull();
    expect(r({ origin: 'http://h:3001', host: 'h:3000' })).toMatch(/Origin/);
    expect(r({ origin: 'null', host: 'null' })).toMatch(/Origin: null/);
    expect(r({})).toBeNull();
  });

  it('actionName: one id keeps the action, several make it bulk, retry-all is its own', () => {
    expect(actionName({ action: 'retry', scope: 'ids', api: true }, ['1'])).toBe('retry');
    expect(actionName({ action: 'cancel', scope: 'ids', api: true }, ['1', '2'])).toBe('cancel-bulk');
    expect(actionName({ action: 'retry-all', scope: 'queue', api: true }, [])).toBe('retry-all');
  });
});
