-- expect: squawk.ban-char-field
-- char(n) pads and compares surprisingly.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE task_queues ADD COLUMN flag char(1);
