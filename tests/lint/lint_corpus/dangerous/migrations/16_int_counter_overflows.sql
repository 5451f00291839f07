-- expect: squawk.prefer-bigint-over-int
-- A 32-bit counter overflows on a busy queue.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE task_queues ADD COLUMN weight int;
