-- 004 online, phase expand: additive state only, each statement in a short transaction under
-- the rollout's lock_timeout (queueguard.upgrade.online.phases). The version table stays at
-- 003 until contract; queueguard_rollout holds the phase.

-- name: owner_column
-- Which range a protocol-4 host took the queue at. Nullable, no default: a catalog-only change
-- (a brief ACCESS EXCLUSIVE on task_queues, no rewrite).
ALTER TABLE task_queues ADD COLUMN IF NOT EXISTS protocol4_range bigint;

-- name: owner_constraint_exists
SELECT count(*) FROM pg_constraint
WHERE conrelid = 'task_queues'::regclass AND conname = 'queue_owned_by_protocol_4';

-- name: owner_constraint
-- The per-queue refusal of protocol-3 hosts, from the database itself (no trigger): a v0.4
-- load sets protocol4_range to the range it takes; a v0.3 load bumps range_id alone and so
-- violates this check, failing with an error that names it. NOT VALID: no scan under the
-- ACCESS EXCLUSIVE lock, and none is needed — the column was just added without a default, so
-- every existing row holds NULL; PostgreSQL enforces the check on every row written from now.
ALTER TABLE task_queues ADD CONSTRAINT queue_owned_by_protocol_4
    CHECK (protocol4_range IS NULL OR protocol4_range = range_id) NOT VALID;

-- name: marker_index_state
-- The marker index: does it exist, and is it valid (a failed CONCURRENTLY build leaves an
-- invalid one behind, which is dropped and built again)?
SELECT i.indisvalid FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = 'queueguard_rollout_pending_directive'
  AND c.relnamespace = current_schema()::regnamespace;

-- name: marker_index
-- Task rows that still need their version directive (pgroll's needs-backfill marker, as a
-- partial index): migrate walks it in keyset batches and it shrinks as they commit, so a
-- rerun resumes where the last one stopped and rows that protocol-3 hosts add meanwhile are
-- found without a table scan. Built without blocking writers.
CREATE INDEX CONCURRENTLY IF NOT EXISTS queueguard_rollout_pending_directive
    ON tasks (physical_queue, task_id)
    WHERE jsonb_typeof(data -> 'task') = 'object' AND NOT (data -> 'task' ? 'versionDirective');

-- name: open_window
-- The protocol window to [3, 4]: v0.4 hosts may start from here (runtime_protocol is locked
-- first by the caller, as every load's handshake reads it first).
UPDATE runtime_protocol SET max_protocol = greatest(max_protocol, 4);
