import {
  Body,
  Controller,
  Get,
  HttpCode,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  Res,
  StreamableFile,
  UseFilters,
  UseGuards,
  type CanActivate,
  type Type,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { DashboardAccessGuard, DashboardRoute } from './dashboard-access.guard';
import { DashboardAssets, HTML_HEADERS } from './dashboard-assets';
import {
  parseEmptyBody,
  parseEnqueueBody,
  parseConnection,
  parseIdsBody,
  parseIdsConnection,
  parseJobId,
  parseJobListQuery,
  parseLogsQuery,
  parseQueue,
  parseRetryFailedBody,
} from './dashboard-input';
import { DashboardInputFilter } from './dashboard-input.filter';
import { DashboardService } from './dashboard.service';

/**
 * The dashboard's routes, mounted at `path` with the app's guards, then DashboardAccessGuard.
 * A class per registration: Nest reads a controller's path and guards from its decorators.
 */
export function createDashboardController(path: string, guards: readonly Type<CanActivate>[]): Type<unknown> {
  @Controller(path)
  @UseGuards(...guards, DashboardAccessGuard)
  @UseFilters(DashboardInputFilter)
  class PgQueueDashboardController {
    constructor(
      @Inject(DashboardService) private readonly svc: DashboardService,
      @Inject(DashboardAssets) private readonly assets: DashboardAssets,
      @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
    ) {}

    private page(res: unknown): string {
      for (const [k, v] of Object.entries(HTML_HEADERS)) this.adapterHost.httpAdapter.setHeader(res, k, v);
      return this.assets.html;
    }

    // Pages: one index.html for every page route; the client routes on the History API.
    @Get()
    @DashboardRoute('read', 'dashboard', false)
    overviewPage(@Res({ passthrough: true }) res: unknown): string {
      return this.page(res);
    }

    @Get('queues/:queue')
    @DashboardRoute('read', 'dashboard', false)
    queuePage(@Res({ passthrough: true }) res: unknown): string {
      return this.page(res);
    }

    @Get('jobs/:id')
    @DashboardRoute('read', 'dashboard', false)
    jobPage(@Res({ passthrough: true }) res: unknown): string {
      return this.page(res);
    }

    @Get('schedules')
    @DashboardRoute('read', 'dashboard', false)
    schedulesPage(@Res({ passthrough: true }) res: unknown): string {
      return this.page(res);
    }

    @Get('nodes')
    @DashboardRoute('read', 'dashboard', false)
    nodesPage(@Res({ passthrough: true }) res: unknown): string {
      return this.page(res);
    }

    @Get('assets/:file')
    @DashboardRoute('read', 'dashboard', false)
    asset(@Param('file') file: string, @Res({ passthrough: true }) res: unknown): StreamableFile {
      const a = this.assets.get(file);
      if (!a) throw new NotFoundException({ error: `No dashboard asset "${file}".` });
      const http = this.adapterHost.httpAdapter;
      http.setHeader(res, 'Content-Type', a.type);
      http.setHeader(res, 'Cache-Control', a.cacheControl);
      http.setHeader(res, 'X-Content-Type-Options', 'nosniff');
      return new StreamableFile(a.body, { type: a.type, length: a.body.length });
    }

    // Reads.
    @Get('api/overview')
    @DashboardRoute('read')
    overview() {
      return this.svc.overview();
    }

    @Get('api/queues/:queue')
    @DashboardRoute('read', 'queue')
    queue(@Param('queue') queue: string) {
      return this.svc.queue(parseQueue(queue));
    }

    @Get('api/queues/:queue/jobs')
    @DashboardRoute('read', 'queue')
    jobs(@Param('queue') queue: string, @Query() query: Record<string, unknown>) {
      const name = parseQueue(queue);
      return this.svc.jobs(name, parseJobListQuery(query ?? {}));
    }

    @Get('api/queues/:queue/groups')
    @DashboardRoute('read', 'queue')
    groups(@Param('queue') queue: string) {
      return this.svc.groups(parseQueue(queue));
    }

    @Get('api/jobs/:id')
    @DashboardRoute('read', 'job')
    async job(@Param('id') id: string, @Query('connection') connection?: unknown) {
      const found = await this.svc.job(parseJobId(id), parseConnection(connection));
      if (!found)
        throw new NotFoundException({
          error: `No job ${id}: it never existed, or it was removed or pruned after its retention.`,
        });
      return found;
    }

    @Get('api/jobs/:id/logs')
    @DashboardRoute('read', 'job')
    async jobLogs(@Param('id') id: string, @Query() query: Record<string, unknown>) {
      const q = parseLogsQuery(query ?? {});
      const page = await this.svc.jobLogs(parseJobId(id), q.offset, q.limit, q.connection);
      if (!page)
        throw new NotFoundException({
          error: `No job ${id}: it never existed, or it was removed or pruned after its retention.`,
        });
      return page;
    }

    @Get('api/jobs/:id/steps')
    @DashboardRoute('read', 'job')
    jobSteps(@Param('id') id: string, @Query('connection') connection?: unknown) {
      return this.svc.jobSteps(parseJobId(id), parseConnection(connection));
    }

    @Get('api/schedules')
    @DashboardRoute('read')
    schedules() {
      return this.svc.schedules();
    }

    @Get('api/nodes')
    @DashboardRoute('read')
    nodes() {
      return this.svc.nodes();
    }

    // Actions: JSON bodies, the custom header, same-site, not in read-only mode (DashboardAccessGuard).
    @Post('api/jobs/retry')
    @HttpCode(200)
    @DashboardRoute('retry', 'ids')
    retry(@Body() body: unknown) {
      return this.svc.retry(parseIdsBody(body), parseIdsConnection(body));
    }

    @Post('api/jobs/cancel')
    @HttpCode(200)
    @DashboardRoute('cancel', 'ids')
    cancel(@Body() body: unknown) {
      return this.svc.cancel(parseIdsBody(body), parseIdsConnection(body));
    }

    @Post('api/jobs/remove')
    @HttpCode(200)
    @DashboardRoute('remove', 'ids')
    remove(@Body() body: unknown) {
      return this.svc.remove(parseIdsBody(body), parseIdsConnection(body));
    }

    @Post('api/queues/:queue/retry-failed')
    @HttpCode(200)
    @DashboardRoute('retry-all', 'queue')
    retryFailed(@Param('queue') queue: string, @Body() body: unknown) {
      return this.svc.retryFailed(parseQueue(queue), parseRetryFailedBody(body));
    }

    @Post('api/queues/:queue/pause')
    @HttpCode(200)
    @DashboardRoute('pause', 'queue')
    pause(@Param('queue') queue: string, @Body() body: unknown) {
      parseEmptyBody(body);
      return this.svc.setPaused(parseQueue(queue), true);
    }

    @Post('api/queues/:queue/resume')
    @HttpCode(200)
    @DashboardRoute('resume', 'queue')
    resume(@Param('queue') queue: string, @Body() body: unknown) {
      parseEmptyBody(body);
      return this.svc.setPaused(parseQueue(queue), false);
    }

    @Post('api/queues/:queue/jobs')
    @HttpCode(200)
    @DashboardRoute('enqueue', 'queue')
    enqueue(@Param('queue') queue: string, @Body() body: unknown) {
      return this.svc.enqueue(parseQueue(queue), parseEnqueueBody(body));
    }
  }
  return PgQueueDashboardController;
}
