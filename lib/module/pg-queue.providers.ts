import { Logger, type Provider } from '@nestjs/common';
import { ModuleRef, ModulesContainer } from '@nestjs/core';
import { isDataSourceLike, resolveConnection } from '../db/connection';
import { PgQueueConfigError } from '../core/errors';
import { DEFAULT_CONNECTION, planConnections } from '../core/connections';
import { getQueueToken } from '../core/tokens';
import { validateQueueName } from '../core/names';
import type { DataSourceLike, PgQueueModuleOptions, RegisterQueueOptions } from '../core/options/types';
import { DEFAULTS } from '../core/options/defaults';
import { resolveQueueOptions } from '../core/options/module-checks';
import { PG_QUEUE_RUNTIME, PG_QUEUE_TESTING, type PgQueueTestMode } from './pg-queue.constants';
import { PG_QUEUE_MODULE_OPTIONS } from './pg-queue.module-definition';
import { PgQueueRuntime, type OpenConnection } from './pg-queue.runtime';
import { clsTransaction } from './cls-transaction';
import type { RegisterQueueAsyncOptions } from './register-queue-async';
import type { AppTransaction } from '../worker/steps';
import type { TransactionManager } from '../core/job';
import type { PgPoolClient } from '../core/pg-types';

// The providers of PgQueueModule, built here so that the module file reads as a list of them.

/** Injected instead of the app's default DataSource where the options cannot use it: never provided. */
const NO_DEFAULT_DATA_SOURCE = Symbol('nestjs-pg-queue:no-default-data-source');

/**
 * The runtime, built whole: the databases to open (each with its DataSource resolved and, under
 * PgQueueTestingModule, its test settings), the ambient transaction lookup and the test mode go
 * in; nothing is set on it afterwards.
 * `withDefaultDataSource`: inject the app's default TypeORM DataSource (optional), which finding
 * its token costs loading `@nestjs/typeorm` and TypeORM (about 160 ms of a worker's start, 367
 * modules). forRoot with a `connection` or a `dataSource` of its own never reads it, so that
 * app, which may not use TypeORM at all, does not load it (pg-queue.module-definition.ts).
 */
export function runtimeProvider(withDefaultDataSource: boolean): Provider {
  return {
    provide: PG_QUEUE_RUNTIME,
    inject: [
      PG_QUEUE_MODULE_OPTIONS,
      ModuleRef,
      ModulesContainer,
      { token: (withDefaultDataSource ? defaultDataSourceToken() : NO_DEFAULT_DATA_SOURCE) as string, optional: true },
      { token: PG_QUEUE_TESTING, optional: true },
    ],
    useFactory: runtimeFactory,
  };
}

/**
 * Whether forRoot's `options` may use the app's default DataSource: neither a `connection` nor a
 * `dataSource` of their own (dataSourceOf's fallback). Unknown options (forRootAsync's, read at
 * boot) may.
 */
export function mayUseDefaultDataSource(options: unknown): boolean {
  if (typeof options !== 'object' || options === null) return true;
  const o = options as Partial<PgQueueModuleOptions>;
  return o.connection === undefined && o.dataSource === undefined;
}

const runtimeFactory = async (
  options: PgQueueModuleOptions,
  moduleRef: ModuleRef,
  modules: ModulesContainer,
  defaultDataSource?: DataSourceLike,
  testMode?: PgQueueTestMode,
): Promise<PgQueueRuntime> => {
  const runtime = await PgQueueRuntime.create(connectionsToOpen(options, moduleRef, defaultDataSource, testMode), {
    logger: new Logger('PgQueue'),
    ambientTransaction: clsTransaction(moduleRef),
    manual: Boolean(testMode),
  });
  try {
    runtime.declareQueues(registrationsIn(modules), asyncRegistrationsIn(modules));
  } catch (err) {
    await runtime.close();
    throw err;
  }
  return runtime;
};

/** The options of each queue provider's factory (see registrationsIn). */
const registrationOf = new WeakMap<object, RegisterQueueOptions>();

/**
 * Every registerQueue(...) of this app (its module container), found by its provider's factory
 * before any queue provider runs: the runtime is their dependency, so it is built first.
 */
function registrationsIn(modules: ModulesContainer): RegisterQueueOptions[] {
  const found: RegisterQueueOptions[] = [];
  for (const m of modules.values()) {
    for (const wrapper of m.providers.values()) {
      const q = typeof wrapper.metatype === 'function' ? registrationOf.get(wrapper.metatype) : undefined;
      if (q) found.push(q);
    }
  }
  return found;
}

/** The queue names of registerQueueAsync(...) calls of this app, found as registrationsIn finds the others. */
const asyncRegistrationOf = new WeakMap<object, string>();

function asyncRegistrationsIn(modules: ModulesContainer): string[] {
  const found: string[] = [];
  for (const m of modules.values()) {
    for (const wrapper of m.providers.values()) {
      const name = typeof wrapper.metatype === 'function' ? asyncRegistrationOf.get(wrapper.metatype) : undefined;
      if (name !== undefined) found.push(name);
    }
  }
  return found;
}

/**
 * The provider of `registerQueueAsync`: the queue, injectable with `@InjectQueue(name)`, built
 * from the options its factory returns (validated then, as registerQueue's are at declaration).
 */
export function asyncQueueProvider(q: RegisterQueueAsyncOptions): Provider {
  const unknown = Object.keys(q ?? {}).filter((k) => !['name', 'imports', 'inject', 'useFactory'].includes(k));
  if (unknown.length) {
    throw new PgQueueConfigError(
      `PgQueueModule.registerQueueAsync(): unknown option(s) ${unknown.map((k) => `"${k}"`).join(', ')}. It takes name, ` +
        'imports, inject and useFactory; the queue options (concurrency, limiter, ...) are what useFactory returns.',
    );
  }
  if (typeof q?.useFactory !== 'function') {
    throw new PgQueueConfigError(
      'PgQueueModule.registerQueueAsync(): useFactory must be a function returning the queue options, ' +
        "e.g. registerQueueAsync({ name: 'email', inject: [ConfigService], useFactory: (config) => ({ concurrency: 5 }) }).",
    );
  }
  const name = validateQueueName(q.name);
  const useFactory = async (runtime: PgQueueRuntime, ...args: never[]) => {
    try {
      const opts: unknown = await q.useFactory(...args);
      if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) {
        throw new PgQueueConfigError(
          `registerQueueAsync({ name: '${name}' }): useFactory returned ${opts === null ? 'null' : Array.isArray(opts) ? 'an array' : typeof opts}; ` +
            'return the queue options as an object (every registerQueue option but name), e.g. { concurrency: 5 }.',
        );
      }
      const given = (opts as { name?: unknown }).name;
      if (given !== undefined && given !== name) {
        throw new PgQueueConfigError(
          `registerQueueAsync({ name: '${name}' }): useFactory returned name ${JSON.stringify(given)}. The name is fixed when ` +
            'the module is declared (for @InjectQueue and @Processor): leave it out of the factory, or return the same one.',
        );
      }
      return runtime.registerQueueAsync({ ...(opts as Omit<RegisterQueueOptions, 'name'>), name });
    } catch (err) {
      // A failed boot must not leave the pools open behind it.
      await runtime.close();
      throw err;
    }
  };
  asyncRegistrationOf.set(useFactory, name);
  return { provide: getQueueToken(name), inject: [PG_QUEUE_RUNTIME, ...(q.inject ?? [])], useFactory };
}

/** The providers of `registerQueue(...queues)`: each queue injectable with `@InjectQueue(name)`. */
export function queueProviders(queues: readonly RegisterQueueOptions[]): Provider[] {
  return queues.map((q) => {
    // Validate now, when the module graph is declared, so a typo fails with its own message.
    const name = resolveQueueOptions(q, DEFAULTS.job).name;
    const useFactory = async (runtime: PgQueueRuntime) => {
      try {
        return await runtime.registerQueueWhenDeclared(q);
      } catch (err) {
        // A failed boot (say, an undeclared connection) must not leave the pools open behind it.
        await runtime.close();
        throw err;
      }
    };
    registrationOf.set(useFactory, q);
    return { provide: getQueueToken(name), inject: [PG_QUEUE_RUNTIME], useFactory };
  });
}

/** Every database of `options`, validated, with where each is (its DataSource resolved). */
function connectionsToOpen(
  options: PgQueueModuleOptions,
  moduleRef: ModuleRef,
  defaultDataSource: DataSourceLike | undefined,
  testMode: PgQueueTestMode | undefined,
): OpenConnection[] {
  return planConnections(options).map((plan) => {
    let resolved = plan.options;
    // PgQueueTestingModule: no LISTEN connection, a short grace period; the workers run manually.
    if (testMode) resolved = { ...resolved, listen: false, shutdownTimeoutMs: testMode.shutdownTimeoutMs };
    const dataSource = dataSourceOf(plan.raw, moduleRef, plan.name === DEFAULT_CONNECTION ? defaultDataSource : undefined);
    const conn = resolveConnection(plan.raw, dataSource, plan.name);
    return { name: plan.name, options: resolved, conn, appTransaction: dataSource && appTransactionOf(dataSource) };
  });
}

/**
 * The token of the app's default TypeORM DataSource: exactly what `@nestjs/typeorm` registers
 * (`getDataSourceToken()`), else TypeORM's DataSource class, which is that token. Both are
 * optional peers: without them, nothing is injected and `connection` must be given.
 */
function defaultDataSourceToken(): unknown {
  /* eslint-disable @typescript-eslint/no-require-imports */
  try {
    return (require('@nestjs/typeorm') as { getDataSourceToken(): unknown }).getDataSourceToken();
  } catch {
    try {
      return (require('typeorm') as { DataSource: unknown }).DataSource;
    } catch {
      return Symbol('typeorm-not-installed');
    }
  }
  /* eslint-enable @typescript-eslint/no-require-imports */
}

/**
 * `{ manager }` steps: a transaction of the app's own DataSource, whose settings the connection's
 * pool is built from (so the step's record and the job's row are in the database it writes to).
 * The pg client under its EntityManager is handed over too: one transaction for both.
 */
function appTransactionOf(ds: DataSourceLike): AppTransaction | undefined {
  const source = ds as DataSourceLike & {
    transaction?: <T>(run: (manager: TransactionManager) => Promise<T>) => Promise<T>;
  };
  if (typeof source.transaction !== 'function') return undefined;
  return (fn) =>
    source.transaction!((manager) => {
      const runner = (manager as { queryRunner?: { databaseConnection?: PgPoolClient } }).queryRunner;
      const client = runner?.databaseConnection;
      if (!client)
        throw new PgQueueConfigError("The DataSource's transaction has no pg connection: is it a postgres DataSource?");
      return fn({ manager, client });
    });
}

/** The DataSource whose settings a connection reuses: given, looked up by token, or the app's default. */
function dataSourceOf(
  options: PgQueueModuleOptions,
  moduleRef: ModuleRef,
  fallback: DataSourceLike | undefined,
): DataSourceLike | undefined {
  if (options.connection !== undefined) return undefined;
  if (isDataSourceLike(options.dataSource)) return options.dataSource;
  if (options.dataSource === undefined) return fallback;
  try {
    return moduleRef.get(options.dataSource as string, { strict: false }) as DataSourceLike;
  } catch (err) {
    throw new PgQueueConfigError(
      `dataSource token ${String(options.dataSource)} is not provided. Pass the DataSource itself, ` +
        'e.g. forRootAsync({ inject: [getDataSourceToken(name)], useFactory: (dataSource) => ({ dataSource }) }).',
      { cause: err },
    );
  }
}
