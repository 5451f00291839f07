-- Statements of `queueguard preflight` itself (the checks live in audit_queries/). All run
-- inside the preflight's one read-only transaction.

-- name: exclusive_holders
-- After a lock timeout: who holds (or awaits) ACCESS EXCLUSIVE, the only mode that conflicts
-- with the ACCESS SHARE a read needs, on a relation of this database. Shared memory only.
SELECT l.relation::regclass::text, l.pid, a.application_name, l.mode
FROM pg_locks AS l
LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'relation'
  AND l.mode = 'AccessExclusiveLock'
  AND l.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
  AND l.pid IS DISTINCT FROM pg_backend_pid()
ORDER BY 1, 2;

-- name: work_mem_floor
-- At least 64 MB of work_mem for this transaction's hashes (never lowered): the one pass over
-- tasks hashes executions' run ids, and at the default 4 MB that hash spills to temporary files
-- (≈65 MB of writes per preflight on 1 M rows, ≈15 % more CPU). Still bounded: larger inputs
-- hash in batches.
SELECT set_config('work_mem', '64MB', true)
WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes('64MB');
