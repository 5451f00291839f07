-- A child locked before its parent: a runtime transaction that holds a task_queues row lock
-- and waits for tasks deadlocks with this revision.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE;
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
-- LOCK without a mode is ACCESS EXCLUSIVE too.
LOCK runtime_protocol, scheduled_tasks;
LOCK TABLE executions;
