-- expect: audit.not_read_only
-- Row locks block every checkpoint of the audited queues.
SELECT physical_queue FROM task_queues FOR UPDATE;
