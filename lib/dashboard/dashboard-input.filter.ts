import { Catch, HttpStatus, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { DashboardBusyError } from '../core/dashboard-reads';
import { DashboardInputError } from './dashboard-input';

/**
 * Bad ids, queue names, states, cursors, limits or bodies: 400 with `{ error }` saying what to
 * change. A read past statementTimeoutMs, or refused with too many waiting: 503 with `{ error }`
 * (never a 500 that logs the statement's parameters).
 */
@Catch(DashboardInputError, DashboardBusyError)
export class DashboardInputFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(err: DashboardInputError | DashboardBusyError, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<unknown>();
    const status = err instanceof DashboardBusyError ? HttpStatus.SERVICE_UNAVAILABLE : HttpStatus.BAD_REQUEST;
    this.adapterHost.httpAdapter.reply(res, { error: err.message }, status);
  }
}
