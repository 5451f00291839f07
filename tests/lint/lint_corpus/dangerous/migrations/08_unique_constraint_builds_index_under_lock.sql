-- expect: squawk.constraint-missing-not-valid, squawk.disallowed-unique-constraint
-- A UNIQUE constraint builds its index under ACCESS EXCLUSIVE.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE task_queues ADD CONSTRAINT task_queues_family UNIQUE (namespace, task_queue);
