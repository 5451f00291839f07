-- expect: squawk.prefer-text-field
-- Changing a varchar limit later needs ACCESS EXCLUSIVE.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE task_queues ADD COLUMN label varchar(64);
