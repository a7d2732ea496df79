-- nestjs-pg-queue schema, version 15: a queue's global concurrency, stored (queue.setGlobalConcurrency).
--
-- At most this many jobs of the queue run at once across every node; NULL: none stored, each
-- node applies its registerQueue({ globalConcurrency }) option if it has one. The limited claim
-- (lib/db/claim-limited.ts) reads it under the queue's claim lock, in the same statement as the
-- running count; nodes learn that a value was set or removed from a '!limits|<queue>' hint
-- confirmed by a read, and from a read every pollIntervalMs (lib/worker/stored-limits.ts).
ALTER TABLE queues ADD COLUMN global_concurrency int
  CONSTRAINT queues_global_concurrency_positive CHECK (global_concurrency IS NULL OR global_concurrency > 0);

-- A node's concurrency as the dashboard asks for it (POST api/queues/:queue/nodes/:node/concurrency):
-- { queue: n }. The node reads its own row on a '!limits|<queue>' hint and every pollIntervalMs, and
-- applies a value that changed since its last read (lib/worker/stored-limits.ts); its heartbeat then
-- reports the new concurrency in `queues`. The row lives as long as the node: a restart starts
-- from the registered concurrency again.
ALTER TABLE nodes ADD COLUMN desired_concurrency jsonb NOT NULL DEFAULT '{}';
