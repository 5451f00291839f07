-- Expand and backfill: the new column is nullable, filled by one set-based statement, and
-- NOT NULL is enforced through a NOT VALID check (validated by a later revision, after which
-- SET NOT NULL needs no table scan).
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE task_queues ADD COLUMN paused_at timestamptz;
UPDATE task_queues SET paused_at = now() WHERE range_id = 0;
ALTER TABLE task_queues ADD COLUMN weight bigint;
UPDATE task_queues SET weight = 1;
ALTER TABLE task_queues
    ADD CONSTRAINT task_queues_weight_not_null CHECK (weight IS NOT NULL) NOT VALID;
