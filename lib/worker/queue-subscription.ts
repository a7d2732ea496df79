import type { LaggedEvent, QueueEvent, QueueEventMap, QueueEventName, QueueEvents } from '../core/queue-events';
import { PgQueueError } from '../core/errors';
import type { ConfirmedEvent } from './event-confirm';
import type { EngineLogger } from './logger';
import type { EventHint, EventSink, EventsHub } from './queue-events-hub';

type AnyListener = (...args: never[]) => unknown;

/** Events an iterator holds for a consumer that has not asked yet, by default. */
const DEFAULT_BUFFER = 1000;

/** One async iterator of a subscription: a bounded buffer, and the lag it owes its consumer. */
class EventIterator implements AsyncIterableIterator<QueueEvent> {
  private readonly buffer: QueueEvent[] = [];
  private waiting: ((r: IteratorResult<QueueEvent>) => void) | null = null;
  private lag: { missed: number; ids: string[]; since: Date; until: Date } | null = null;
  private ended = false;

  constructor(
    private readonly size: number,
    private readonly onReturn: (it: EventIterator) => void,
  ) {}

  push(e: QueueEvent): void {
    if (this.ended) return;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: e, done: false });
      return;
    }
    if (this.buffer.length >= this.size) {
      // The consumer is slower than the events: the oldest goes, and it is told so.
      const old = this.buffer.shift()!;
      const id = old.event === 'lagged' ? undefined : old.args[0].id;
      this.addLag(1, id === undefined ? [] : [id], new Date(), new Date());
    }
    this.buffer.push(e);
  }

  /** Half its buffer or more is waiting for the consumer. */
  get backlogged(): boolean {
    return this.buffer.length * 2 >= this.size;
  }

  addLag(count: number, ids: readonly string[], since: Date, until: Date): void {
    if (this.lag) {
      this.lag.missed += count;
      this.lag.until = until;
      for (const id of ids) if (this.lag.ids.length < 100) this.lag.ids.push(id);
    } else this.lag = { missed: count, ids: ids.slice(0, 100), since, until };
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: this.takeLag()!, done: false });
    }
  }

  private takeLag(): QueueEvent | null {
    if (!this.lag) return null;
    const lag: LaggedEvent = { ...this.lag, ids: [...this.lag.ids] };
    this.lag = null;
    return { event: 'lagged', args: [lag] };
  }

  next(): Promise<IteratorResult<QueueEvent>> {
    const lag = this.takeLag();
    if (lag) return Promise.resolve({ value: lag, done: false });
    const e = this.buffer.shift();
    if (e) return Promise.resolve({ value: e, done: false });
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiting = resolve));
  }

  end(): void {
    this.ended = true;
    this.buffer.length = 0;
    const w = this.waiting;
    this.waiting = null;
    w?.({ value: undefined, done: true });
  }

  return(): Promise<IteratorResult<QueueEvent>> {
    this.end();
    this.onReturn(this);
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

/**
 * `queue.events()`: the cross-process events of one queue, as listeners (`on`/`off`) and async
 * iterators. Registered with the hub only while something listens, so an idle subscription
 * costs nothing; the hub opens its LISTEN connection at the first.
 */
export class QueueSubscription implements QueueEvents, EventSink {
  private readonly listeners = new Map<QueueEventName, Set<AnyListener>>();
  private readonly iterators = new Set<EventIterator>();
  private attached = false;
  private isClosed = false;

  constructor(
    readonly queue: string,
    private readonly hub: EventsHub,
    private readonly logger: EngineLogger,
    private readonly onClose: (s: QueueSubscription) => void = () => undefined,
  ) {}

  on<K extends QueueEventName>(event: K, listener: (...args: QueueEventMap[K]) => unknown): this {
    if (this.isClosed) return this;
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener as AnyListener);
    this.attach();
    return this;
  }

  off<K extends QueueEventName>(event: K, listener: (...args: QueueEventMap[K]) => unknown): this {
    this.listeners.get(event)?.delete(listener as AnyListener);
    if (this.listeners.get(event)?.size === 0) this.listeners.delete(event);
    this.detachIfIdle();
    return this;
  }

  iterate(opts: { bufferSize?: number } = {}): AsyncIterableIterator<QueueEvent> {
    const size = opts.bufferSize ?? DEFAULT_BUFFER;
    if (!Number.isSafeInteger(size) || size < 1) {
      throw new RangeError(`queue.events().iterate({ bufferSize }): ${String(size)} is not a whole number of at least 1.`);
    }
    const it = new EventIterator(size, (x) => {
      this.iterators.delete(x);
      this.detachIfIdle();
    });
    if (this.isClosed) it.end();
    else {
      this.iterators.add(it);
      this.attach();
    }
    return it;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<QueueEvent> {
    return this.iterate();
  }

  async waitUntilReady(opts: { timeoutMs?: number } = {}): Promise<void> {
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
    this.attach();
    for (;;) {
      if (this.isClosed) throw new PgQueueError(`queue.events() of "${this.queue}": closed before its LISTEN was active.`);
      if (this.hub.listening) return;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new PgQueueError(
          `queue.events() of "${this.queue}": LISTEN not active after ${opts.timeoutMs} ms (the listener keeps reconnecting; see its log).`,
        );
      }
      // ready() answers at once when no listener exists yet: wait a little then, never spin.
      if (!(await this.hub.ready(Math.min(left, 1000)))) await new Promise((r) => setTimeout(r, Math.min(left, 50)));
    }
  }

  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.listeners.clear();
    for (const it of this.iterators) it.end();
    this.iterators.clear();
    this.detachIfIdle();
    this.onClose(this);
    return Promise.resolve();
  }

  /** @internal This queue's events that a listener or an iterator takes. */
  wants(h: EventHint): boolean {
    return h.queue === this.queue && (this.iterators.size > 0 || this.listeners.has(h.kind));
  }

  /** @internal The hub confirmed an event of this queue. */
  deliver(e: ConfirmedEvent): void {
    this.emit({ event: e.event, args: e.args } as QueueEvent);
  }

  /** @internal The hub dropped events of this queue before reading them. */
  lagged(count: number, ids: readonly string[], since: Date, until: Date): void {
    for (const it of this.iterators) it.addLag(count, ids, since, until);
    this.call('lagged', [{ missed: count, ids: [...ids], since, until }]);
  }

  /** @internal True while one of its iterators has half its buffer waiting. */
  backlogged(): boolean {
    for (const it of this.iterators) if (it.backlogged) return true;
    return false;
  }

  /** @internal */
  connected(): void {}

  /** @internal The module shuts down: iterators end, listeners are dropped. */
  closed(): void {
    void this.close();
  }

  private emit(e: QueueEvent): void {
    for (const it of this.iterators) it.push(e);
    this.call(e.event, e.args);
  }

  private call(event: QueueEventName, args: readonly unknown[]): void {
    const set = this.listeners.get(event);
    if (!set) return;
    for (const l of set) {
      // A listener that throws (or rejects) is logged; the others still run.
      try {
        const out = (l as (...a: unknown[]) => unknown)(...args);
        if (out instanceof Promise) out.catch((err: Error) => this.failed(event, err));
      } catch (err) {
        this.failed(event, err as Error);
      }
    }
  }

  private failed(event: string, err: Error): void {
    this.logger.error(
      `pg-queue: a '${event}' listener of queue "${this.queue}" threw: ${err?.message ?? String(err)}`,
      err?.stack,
    );
  }

  private attach(): void {
    if (this.attached || this.isClosed) return;
    this.attached = true;
    this.hub.add(this);
  }

  private detachIfIdle(): void {
    if (!this.attached || (!this.isClosed && (this.listeners.size > 0 || this.iterators.size > 0))) return;
    this.attached = false;
    this.hub.remove(this);
  }
}
