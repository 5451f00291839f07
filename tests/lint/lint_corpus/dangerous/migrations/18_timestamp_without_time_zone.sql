-- expect: squawk.prefer-timestamp-tz
-- Timestamps without a zone are read differently by hosts in other zones.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE task_queues ADD COLUMN paused_at timestamp;
