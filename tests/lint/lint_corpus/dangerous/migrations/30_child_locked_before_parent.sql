-- expect: migration.lock_order
-- tasks before task_queues: deadlocks with a runtime checkpoint.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE;
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
