-- Looks like an audit, writes and locks.
WITH gone AS (
    DELETE FROM tasks WHERE task_id < 0 RETURNING physical_queue
)
SELECT set_config('statement_timeout', '0', true),
       nextval('tasks_seq'),
       pg_catalog.pg_advisory_xact_lock(42),
       public.audit_helper(physical_queue),
       physical_queue
FROM gone
FOR UPDATE;
