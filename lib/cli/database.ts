import { Pool } from 'pg';
import { PgQueueError } from '../core/errors';
import { validateQueueName, validateSchemaName } from '../core/names';
import { DEFAULTS } from '../core/options/defaults';
import { explainConnectFailure, isServerError } from '../db/connect-probe';
import { DashboardStore } from '../db/dashboard-store';
import { DoctorReads } from '../db/doctor';
import { poolExecutor } from '../db/executor';
import { JobStore } from '../db/job-store';
import { currentVersion, latestVersion } from '../db/migrator';
import { Queue } from '../producer/queue';
import { UsageError } from './args';

/** How long the CLI waits for the server to accept a connection. */
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * The CLI's view of one queue schema: a small pool, and the same framework-free layers the
 * module's runtime wires (pg-queue.connection.ts): a JobStore, Queue handles over it, the
 * dashboard's reads and the doctor's. No worker, no listener, no maintenance: the CLI changes
 * jobs only through the calls an app makes.
 */
export class CliDatabase {
  readonly store: JobStore;
  readonly dashboard: DashboardStore;
  readonly doctor: DoctorReads;
  private readonly queues = new Map<string, Queue>();

  private constructor(
    readonly pool: Pool,
    readonly schema: string,
    /** The schema's version when the CLI connected (0: no schema yet). */
    readonly version: number,
    warn: (message: string) => void,
  ) {
    this.store = new JobStore(pool, {
      schema,
      retention: { ...DEFAULTS.retention, failedMs: null },
      historyPartitionMs: DEFAULTS.historyPartitionMs,
      // The operator's writes commit durably (the asyncCommit clause is for the workers' hot path).
      asyncCommit: false,
      preparedStatements: false,
      poolSize: 4,
      warn,
    });
    this.dashboard = new DashboardStore(pool, schema, this.store.channel, 2, 60_000);
    this.doctor = new DoctorReads(poolExecutor(pool), schema);
  }

  /**
   * Connects (the first query reads the schema's version, so a wrong URL fails here with what
   * is wrong at which host). `schema` is checked as the module checks its `schema` option.
   */
  static async open(url: string | undefined, schemaFlag: string | undefined, warn: (m: string) => void): Promise<CliDatabase> {
    if (!url) throw new UsageError('No database: pass --url postgres://user@host:5432/db, or set DATABASE_URL.');
    let schema: string;
    try {
      schema = validateSchemaName(schemaFlag ?? DEFAULTS.schema);
    } catch (err) {
      throw new UsageError(`--schema: ${(err as Error).message}`);
    }
    const config = {
      connectionString: url,
      application_name: 'nestjs-pg-queue-cli',
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    };
    const pool = new Pool({ ...config, max: 4 });
    pool.on('error', () => undefined);
    try {
      return new CliDatabase(pool, schema, await currentVersion(pool, schema), warn);
    } catch (err) {
      await pool.end().catch(() => undefined);
      const message = (err as Error).message;
      if (!isServerError(err)) {
        const why = await explainConnectFailure(config, CONNECT_TIMEOUT_MS, message);
        throw new PgQueueError(`${why} (The CLI connects to --url, else $DATABASE_URL.)`, { cause: err });
      }
      throw new PgQueueError(`Cannot use the database at ${url.replace(/\/\/[^@/]*@/, '//***@')}: ${message}`, { cause: err });
    }
  }

  /** Refuses a schema that is missing or older than this build needs (the statements would not match it). */
  requireCurrent(): void {
    const need = latestVersion();
    if (this.version === 0) {
      throw new PgQueueError(
        `Schema "${this.schema}" has no nestjs-pg-queue tables in this database. Check --schema and --url, or create them: nestjs-pg-queue migrate.`,
      );
    }
    if (this.version < need) {
      throw new PgQueueError(
        `Schema "${this.schema}" is at version ${this.version}; this nestjs-pg-queue needs ${need}. Run nestjs-pg-queue migrate (or boot an app with migrate: true) first.`,
      );
    }
  }

  /** A handle on queue `name`, as an app's `@InjectQueue(name)` (with the module's default job options). */
  queue(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      try {
        validateQueueName(name);
      } catch (err) {
        throw new UsageError(`--queue: ${(err as Error).message}`);
      }
      q = new Queue(name, this.store, DEFAULTS.job, DEFAULTS.maxPayloadBytes);
      this.queues.set(name, q);
    }
    return q;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
