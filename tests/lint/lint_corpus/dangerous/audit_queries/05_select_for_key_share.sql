-- expect: audit.not_read_only
-- Even the weakest row lock is a lock.
SELECT physical_queue FROM task_queues FOR KEY SHARE SKIP LOCKED;
