import {
  Body,
  Controller,
  Get,
  HttpCode,
  Inject,
  Param,
  Post,
  Query,
  Req,
  Res,
  UseFilters,
  UseGuards,
  type CanActivate,
  type Type,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { DashboardAccessGuard, DashboardRoute } from './dashboard-access.guard';
import { DashboardAssets, HTML_HEADERS } from './dashboard-assets';
import { parseEmptyBody, parseIdsBody, parseIdsConnection, parseQueue } from './dashboard-input';
import { DashboardInputFilter } from './dashboard-input.filter';
import {
  parseCleanBody,
  parseCountQuery,
  parseGlobalConcurrencyBody,
  parseNodeConcurrencyBody,
  parseNodeId,
  parseMatchingBody,
  parseNameBody,
  parseSchedulerId,
  parseSearchQuery,
} from './dashboard-operations-input';
import { DashboardOperations } from './dashboard-operations.service';
import type { DashboardRequest } from './dashboard.options';

/**
 * The operator's routes of the dashboard (issue 27 point 8), beside createDashboardController's
 * and guarded alike: the search box, the count a confirmation shows, clean by age, drain and
 * promote. Every POST goes through DashboardAccessGuard's action rules (the custom header, a JSON
 * body, same-site, refused when readOnly) and `authorize` with its own action name.
 */
export function createDashboardOperationsController(path: string, guards: readonly Type<CanActivate>[]): Type<unknown> {
  @Controller(path)
  @UseGuards(...guards, DashboardAccessGuard)
  @UseFilters(DashboardInputFilter)
  class PgQueueDashboardOperationsController {
    constructor(
      @Inject(DashboardOperations) private readonly ops: DashboardOperations,
      @Inject(DashboardAssets) private readonly assets: DashboardAssets,
      @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
    ) {}

    /** The search results page: the shell HTML, as every page route answers. */
    @Get('search')
    @DashboardRoute('read', 'dashboard', false)
    searchPage(@Res({ passthrough: true }) res: unknown): string {
      for (const [k, v] of Object.entries(HTML_HEADERS)) this.adapterHost.httpAdapter.setHeader(res, k, v);
      return this.assets.html;
    }

    @Get('api/search')
    @DashboardRoute('read')
    search(@Query() query: Record<string, unknown>, @Req() req: DashboardRequest) {
      return this.ops.search(parseSearchQuery(query ?? {}), req);
    }

    @Get('api/queues/:queue/count')
    @DashboardRoute('read', 'queue')
    count(@Param('queue') queue: string, @Query() query: Record<string, unknown>) {
      const name = parseQueue(queue);
      return this.ops.count(name, parseCountQuery(query ?? {}));
    }

    @Post('api/queues/:queue/clean')
    @HttpCode(200)
    @DashboardRoute('clean', 'queue')
    clean(@Param('queue') queue: string, @Body() body: unknown) {
      return this.ops.clean(parseQueue(queue), parseCleanBody(body));
    }

    @Post('api/queues/:queue/drain')
    @HttpCode(200)
    @DashboardRoute('drain', 'queue')
    drain(@Param('queue') queue: string, @Body() body: unknown) {
      parseEmptyBody(body);
      return this.ops.drain(parseQueue(queue));
    }

    @Post('api/queues/:queue/promote-all')
    @HttpCode(200)
    @DashboardRoute('promote-all', 'queue')
    promoteAll(@Param('queue') queue: string, @Body() body: unknown) {
      return this.ops.promoteAll(parseQueue(queue), parseNameBody(body));
    }

    // Every job of a state (and name) of the queue, not a selection: the page counts them first
    // (GET api/queues/:queue/count) and asks for a confirmation.
    @Post('api/queues/:queue/retry-matching')
    @HttpCode(200)
    @DashboardRoute('retry-matching', 'queue')
    retryMatching(@Param('queue') queue: string, @Body() body: unknown) {
      return this.ops.matching('retry', parseQueue(queue), parseMatchingBody('retry', body));
    }

    @Post('api/queues/:queue/remove-matching')
    @HttpCode(200)
    @DashboardRoute('remove-matching', 'queue')
    removeMatching(@Param('queue') queue: string, @Body() body: unknown) {
      return this.ops.matching('remove', parseQueue(queue), parseMatchingBody('remove', body));
    }

    @Post('api/queues/:queue/cancel-matching')
    @HttpCode(200)
    @DashboardRoute('cancel-matching', 'queue')
    cancelMatching(@Param('queue') queue: string, @Body() body: unknown) {
      return this.ops.matching('cancel', parseQueue(queue), parseMatchingBody('cancel', body));
    }

    @Get('api/queues/:queue/concurrency')
    @DashboardRoute('read', 'queue')
    concurrency(@Param('queue') queue: string) {
      return this.ops.concurrency(parseQueue(queue));
    }

    @Post('api/queues/:queue/global-concurrency')
    @HttpCode(200)
    @DashboardRoute('global-concurrency', 'queue')
    globalConcurrency(@Param('queue') queue: string, @Body() body: unknown) {
      return this.ops.globalConcurrency(parseQueue(queue), parseGlobalConcurrencyBody(body));
    }

    @Post('api/queues/:queue/nodes/:node/concurrency')
    @HttpCode(200)
    @DashboardRoute('concurrency', 'queue')
    nodeConcurrency(@Param('queue') queue: string, @Param('node') node: string, @Body() body: unknown) {
      return this.ops.nodeConcurrency(parseQueue(queue), parseNodeId(node), parseNodeConcurrencyBody(body));
    }

    @Post('api/queues/:queue/schedulers/:id/pause')
    @HttpCode(200)
    @DashboardRoute('scheduler-pause', 'queue')
    schedulerPause(@Param('queue') queue: string, @Param('id') id: string, @Body() body: unknown) {
      parseEmptyBody(body);
      return this.ops.scheduler('pause', parseQueue(queue), parseSchedulerId(id));
    }

    @Post('api/queues/:queue/schedulers/:id/resume')
    @HttpCode(200)
    @DashboardRoute('scheduler-resume', 'queue')
    schedulerResume(@Param('queue') queue: string, @Param('id') id: string, @Body() body: unknown) {
      parseEmptyBody(body);
      return this.ops.scheduler('resume', parseQueue(queue), parseSchedulerId(id));
    }

    @Post('api/queues/:queue/schedulers/:id/run')
    @HttpCode(200)
    @DashboardRoute('scheduler-run', 'queue')
    schedulerRun(@Param('queue') queue: string, @Param('id') id: string, @Body() body: unknown) {
      parseEmptyBody(body);
      return this.ops.scheduler('run', parseQueue(queue), parseSchedulerId(id));
    }

    @Post('api/queues/:queue/schedulers/:id/remove')
    @HttpCode(200)
    @DashboardRoute('scheduler-remove', 'queue')
    schedulerRemove(@Param('queue') queue: string, @Param('id') id: string, @Body() body: unknown) {
      parseEmptyBody(body);
      return this.ops.scheduler('remove', parseQueue(queue), parseSchedulerId(id));
    }

    @Post('api/jobs/promote')
    @HttpCode(200)
    @DashboardRoute('promote', 'ids')
    promote(@Body() body: unknown) {
      return this.ops.promote(parseIdsBody(body), parseIdsConnection(body));
    }
  }
  return PgQueueDashboardOperationsController;
}
