import type { SupervisorEventMap } from './events';
import type { GroupCountsOrder, QueueGroupCounts } from './group-counts';
import type { QueueCounts } from './job';
import type { ResolvedPgQueueOptions, ResolvedQueueOptions } from './options/resolved';

// The runtime as the companions (health, metrics, testing; lib/module hands it to them under
// PG_QUEUE_RUNTIME) see it: what they read and the few things they drive, in core types only, so
// a companion imports neither db/ nor worker/ (eslint.config.mjs, MAY_IMPORT). PgQueueRuntime
// implements PgQueueReadApi, so the compiler keeps this narrow view true to the classes behind it.

/** The LISTEN connection's state; `connection` names it when the app has more than one. */
export interface ListenerState {
  readonly connected: boolean;
  /** Epoch ms; null while connected. */
  readonly disconnectedSince: number | null;
  readonly scheduledReconnect: { readonly attempt: number; readonly delayMs: number } | null;
  readonly connection?: string;
}

/** One connection's workers: their job events, and (in the testing module's manual mode) a round. */
export interface WorkersReadApi {
  on<K extends keyof SupervisorEventMap>(event: K, listener: (...args: SupervisorEventMap[K]) => void): unknown;
  off<K extends keyof SupervisorEventMap>(event: K, listener: (...args: SupervisorEventMap[K]) => void): unknown;
  /** The queues with workers here. */
  readonly queues: string[];
  readonly running: boolean;
  readonly isManual: boolean;
  /** Manual mode: claims and runs due jobs once, resolving with how many ran once their outcomes are written. */
  runRound(queue?: string, limit?: number): Promise<number>;
}

/** One connection's store, as far as the companions read or drive it. */
export interface StoreReadApi {
  counts(queue: string | null): Promise<Map<string, QueueCounts>>;
  makeDueWaiting(queue: string | null): Promise<number>;
  /** A queue's groups, the first `top` in `orderBy`'s order (lib/db/group-counts.ts). */
  groupCounts(queue: string, top: number, orderBy: GroupCountsOrder): Promise<QueueGroupCounts>;
}

/** One database of the app. */
export interface ConnectionReadApi {
  readonly name: string;
  readonly options: ResolvedPgQueueOptions;
  readonly store: StoreReadApi;
  readonly supervisor: WorkersReadApi;
}

/** The app's queue runtime, as the companions read it. */
export interface PgQueueReadApi {
  /** The default connection's options. */
  readonly options: ResolvedPgQueueOptions;
  /** The default connection's workers. */
  readonly supervisor: WorkersReadApi;
  /** Every connection, the default first. */
  readonly connections: readonly ConnectionReadApi[];
  /** The connection of a registered queue (the default for a name this app never registered). */
  connectionOf(queue: string): ConnectionReadApi;
  /** The listener down longest if any is down, else connected; null when none listens. */
  readonly listenerState: ListenerState | null;
  /** True while the workers of every connection run. */
  readonly workersRunning: boolean;
  /** Worker processes heartbeating into any connection's nodes registry now. */
  liveNodes(): Promise<number>;
  readonly registeredQueues: ResolvedQueueOptions[];
  /** A registered queue's figures; throws for a name this app never registered. */
  queue(name: string, caller?: string): { getCounts(): Promise<QueueCounts> };
}
