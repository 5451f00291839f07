-- expect: migration.lock_order
-- TRUNCATE takes ACCESS EXCLUSIVE: children first is the wrong order.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
TRUNCATE tasks;
TRUNCATE task_queues;
