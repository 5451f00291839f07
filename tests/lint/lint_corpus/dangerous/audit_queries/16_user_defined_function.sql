-- expect: audit.not_read_only
-- A user-defined function can write.
SELECT public.audit_helper(physical_queue) FROM task_queues;
