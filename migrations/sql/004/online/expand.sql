-- 004 online, phase expand: additive state only, each statement in a short transaction under
-- the rollout's lock_timeout (queueguard.queue_schema.online.phases). The version table stays at
-- 003 until contract; queueguard_rollout holds the phase.

-- name: owner
-- Which range a protocol-4 host took the queue at, and the per-queue refusal of protocol-3
-- hosts it makes possible, from the database itself (no trigger): a v0.4 load sets
-- protocol4_range to the range it takes; a v0.3 load bumps range_id alone and so violates the
-- check, failing with an error that names it. One statement, so a rerun after an interrupted
-- expand replaces the constraint instead of failing on it. Catalog-only (a brief ACCESS
-- EXCLUSIVE on task_queues): the column is nullable without a default, and the check is
-- NOT VALID, so nothing is scanned — none is needed, every existing row holds NULL, and
-- PostgreSQL checks every row written from now on.
ALTER TABLE task_queues
    ADD COLUMN IF NOT EXISTS protocol4_range bigint,
    DROP CONSTRAINT IF EXISTS queue_owned_by_protocol_4,
    ADD CONSTRAINT queue_owned_by_protocol_4
        CHECK (protocol4_range IS NULL OR protocol4_range = range_id) NOT VALID;

-- name: marker_index_state
-- The marker index: does it exist, and is it valid (a failed CONCURRENTLY build leaves an
-- invalid one behind, which is dropped and built again)?
SELECT i.indisvalid FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = 'queueguard_rollout_pending_directive'
  AND c.relnamespace = current_schema()::regnamespace;

-- name: marker_index_building
-- A CREATE INDEX CONCURRENTLY of the marker index still running (another migrator's, whose
-- lease may have expired meanwhile: the build runs outside any transaction).
SELECT p.pid FROM pg_stat_progress_create_index p
WHERE p.index_relid = to_regclass('queueguard_rollout_pending_directive');

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
