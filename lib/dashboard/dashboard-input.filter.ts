import { Catch, HttpStatus, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { DashboardInputError } from './dashboard-input';

/** Bad ids, queue names, states, cursors, limits or bodies: 400 with `{ error }` saying what to change. */
@Catch(DashboardInputError)
export class DashboardInputFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(err: DashboardInputError, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<unknown>();
    this.adapterHost.httpAdapter.reply(res, { error: err.message }, HttpStatus.BAD_REQUEST);
  }
}
