import { PgQueueConfigError } from '../core/errors';
import { quote } from '../core/input-text';
import type { FlowJob, FlowNode, Job, JobOptions } from '../core/job';
import type { TransactionTarget } from '../db/executor';
import type { FlowNodeRow } from '../db/flow-insert';
import { insertedToJob } from '../db/new-job';
import { failurePolicy } from './enqueue';
import type { Queue } from './queue';
import { tracedEnqueue } from './tracing';

const FLOW_KEYS = ['queue', 'name', 'payload', 'opts', 'onFailure', 'children'];
/** `@nestjs/bullmq`'s FlowProducer names, and ours. */
const FLOW_HINTS: Readonly<Record<string, string>> = {
  queueName: 'queue',
  data: 'payload',
};

/**
 * Creates trees of jobs across queues in one statement (`QueueService.addFlow`). Every job of
 * the tree is inserted, with its edges, or none is: in the caller's transaction with `{ manager }`
 * or `{ client }` (or the implicit CLS one), so a flow commits or rolls back with the business
 * rows that caused it. A parent is released (or failed) by the trigger `jobs_release_dependents`
 * of migrations/0008_flows.sql when its last child leaves the jobs table; no code in lib/ does it.
 */
export class FlowProducer {
  /** @internal */
  constructor(private readonly queueOf: (name: string) => Queue) {}

  /**
   * One PRODUCER span (`send <root queue>`) when an SDK records spans: every job's row is built
   * inside it, so the whole tree records one trace, which each child's and the parent's handler
   * continue.
   */
  add<TPayload = unknown>(flow: FlowJob<TPayload>, target?: TransactionTarget): Promise<FlowNode<TPayload>> {
    const root = typeof flow === 'object' && flow !== null ? String((flow as { queue?: unknown }).queue) : '';
    return tracedEnqueue(
      root,
      'addFlow',
      1,
      () => this.addTree(flow, target),
      (node) => [node.job],
    );
  }

  private async addTree<TPayload>(flow: FlowJob<TPayload>, target: TransactionTarget | undefined): Promise<FlowNode<TPayload>> {
    const nodes: FlowNodeRow[] = [];
    const queues: Queue[] = [];
    const childrenOf: number[][] = [];
    // Pre-order, iteratively: a parent gets its index before its children, and a deep chain
    // cannot overflow the stack.
    const stack: { f: unknown; parent: number; path: string }[] = [{ f: flow, parent: -1, path: 'flow' }];
    while (stack.length) {
      const { f, parent, path } = stack.pop()!;
      const node = checkNode(f, path);
      const q = this.queueOf(node.queue);
      // One statement writes the whole tree, and a child's release is a statement of its own
      // database: every queue of a flow must be on the root's connection.
      if (queues.length && !queues[0].sameDatabaseAs(q)) {
        throw new PgQueueConfigError(
          `${path}: queue ${quote(node.queue)} is on another connection (database) than the flow's root queue ` +
            `${quote(queues[0].name)}; a flow is written in one statement of one database. Put the flow's queues on one connection.`,
        );
      }
      const row = q.flowRow(node.name, node.payload, node.opts as JobOptions | undefined);
      const i = nodes.push({ row, parent, onFailure: failurePolicy(path, node.onFailure) }) - 1;
      queues.push(q);
      childrenOf.push([]);
      if (parent >= 0) childrenOf[parent].push(i);
      const kids = node.children ?? [];
      if (!Array.isArray(kids))
        throw new PgQueueConfigError(`${path}.children must be an array of flow jobs, got ${quote(kids)}.`);
      for (let k = kids.length - 1; k >= 0; k--) stack.push({ f: kids[k], parent: i, path: `${path}.children[${k}]` });
    }
    const out = await queues[0].insertFlow(nodes, target);
    const byQueue = new Map<Queue, FlowNodeRow['row'][]>();
    nodes.forEach((n, i) => {
      const list = byQueue.get(queues[i]);
      if (list) list.push(n.row);
      else byQueue.set(queues[i], [n.row]);
    });
    for (const [q, rows] of byQueue) q.reportEnqueued(rows);
    const jobs: Job[] = nodes.map((n, i) => {
      const job = insertedToJob(n.row, out.ids[i], out.now);
      return out.waitingChildren[i] ? { ...job, state: 'waiting-children' } : job;
    });
    // Children come after their parent in pre-order: built from the last node back, each finds
    // its children already built.
    const built: FlowNode[] = new Array<FlowNode>(jobs.length);
    for (let i = jobs.length - 1; i >= 0; i--) built[i] = { job: jobs[i], children: childrenOf[i].map((c) => built[c]) };
    return built[0] as FlowNode<TPayload>;
  }
}

function checkNode(f: unknown, path: string): FlowJob {
  if (typeof f !== 'object' || f === null || Array.isArray(f)) {
    throw new PgQueueConfigError(`${path} is ${quote(f)}; a flow job is { queue, name, payload, opts?, onFailure?, children? }.`);
  }
  for (const k in f) {
    if (!FLOW_KEYS.includes(k)) {
      const hint = FLOW_HINTS[k];
      throw new PgQueueConfigError(
        `${path} has unknown key ${quote(k)}${hint ? ` (use ${hint})` : ''}. A flow job is { ${FLOW_KEYS.join(', ')} }.`,
      );
    }
  }
  const node = f as FlowJob;
  if (typeof node.queue !== 'string')
    throw new PgQueueConfigError(`${path}.queue must be a queue name, got ${quote(node.queue)}.`);
  return node;
}
