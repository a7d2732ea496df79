// An ES-module NestJS 12 app (plain JavaScript: decorators are applied by calling them) that
// uses the CommonJS build of nestjs-pg-queue. run.mjs copies the build into
// ./node_modules/nestjs-pg-queue before importing this file, so `nestjs-pg-queue` and
// everything it requires (@nestjs/common, @nestjs/core, typeorm) resolve to this workspace's
// NestJS 12 / TypeORM 1.x, not the root's NestJS 11 / TypeORM 0.3.
//
// PgQueueModule.forRoot({}) gets NO connection: the queue must find the app's default TypeORM
// DataSource through DI. It looks it up by the DataSource class its CJS code gets from
// require('typeorm'); @nestjs/typeorm 12 (ESM) provides it under the class from
// `import 'typeorm'`. If those were two different classes (dual-package hazard), the boot
// would fail with "PgQueueModule has no database connection".

import 'reflect-metadata';
import { Inject, Injectable, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { InjectQueue, PgQueueModule, Process, Processor } from 'nestjs-pg-queue';

/** Applies a method decorator the way TypeScript's emitted __decorate would. */
function decorateMethod(decorator, Ctor, method) {
  const proto = Ctor.prototype;
  const descriptor = Object.getOwnPropertyDescriptor(proto, method);
  const result = decorator(proto, method, descriptor);
  if (result) Object.defineProperty(proto, method, result);
}

/** The worker of queue 'mail': records every job it runs. */
export class MailProcessor {
  seen = [];

  async welcome(job) {
    this.seen.push({ id: job.id, name: job.name, payload: job.payload, attempt: job.attempt });
    return { sentTo: job.payload.email };
  }
}
Processor('mail')(MailProcessor);
decorateMethod(Process('welcome'), MailProcessor, 'welcome');

/** Thrown inside a transaction to roll it back on purpose. */
export class RollbackOnPurpose extends Error {
  name = 'RollbackOnPurpose';
}

/** Enqueues welcome mails inside the caller's TypeORM transaction. */
export class SignupService {
  constructor(dataSource, mailQueue) {
    this.dataSource = dataSource;
    this.mailQueue = mailQueue;
  }

  /**
   * Enqueues a welcome mail in a transaction; with `rollback: true` the transaction is rolled
   * back after the insert. Returns the job as inserted (its id exists either way).
   */
  async signUp(email, { rollback = false } = {}) {
    let job;
    try {
      await this.dataSource.transaction(async (manager) => {
        job = await this.mailQueue.add('welcome', { email }, { manager });
        if (rollback) throw new RollbackOnPurpose(`rolled back the signup of ${email}`);
      });
    } catch (err) {
      if (!(err instanceof RollbackOnPurpose)) throw err;
    }
    return job;
  }
}
Injectable()(SignupService);
Inject(DataSource)(SignupService, undefined, 0);
InjectQueue('mail')(SignupService, undefined, 1);

/** The root module of the app for the database at `url`. */
export function createAppModule(url) {
  class AppModule {}
  Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url, retryAttempts: 1, retryDelay: 500 }),
      PgQueueModule.forRoot({}),
      PgQueueModule.registerQueue({ name: 'mail' }),
    ],
    providers: [MailProcessor, SignupService],
  })(AppModule);
  return AppModule;
}
