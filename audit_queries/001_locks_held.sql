-- check:    locks.conflicting_lock (warning)
-- applies-to: 001 002 003
-- guard:    no (advisory: preflight only; under the migration's own locks nothing else holds one)
-- What:     locks that other sessions (or forgotten prepared transactions) hold or await on the
--           tables the pending migrations lock: any mode on tasks, task_queues and
--           runtime_protocol (003/004 take ACCESS EXCLUSIVE on them, which conflicts with
--           every mode) and ACCESS EXCLUSIVE on executions (004 only reads it). The migration
--           would queue behind them and give up at its lock_timeout. One row per table.
-- Cost:     reads pg_locks and pg_stat_activity (shared memory views; no table is read).
-- Locks:    none on any table. Read-only; no row when nothing conflicts.
WITH target AS (
    SELECT t.name, t.any_mode, to_regclass(t.name) AS rel
    FROM (VALUES ('tasks', true), ('task_queues', true), ('runtime_protocol', true),
                 ('executions', false)) AS t (name, any_mode)
), held AS (
    SELECT t.name AS relation, l.pid, l.mode, l.granted, l.virtualtransaction,
           a.application_name, a.state, a.xact_start,
           row_number() OVER (PARTITION BY t.name
                              ORDER BY l.granted DESC, a.xact_start NULLS LAST, l.pid) AS n
    FROM pg_locks AS l
    JOIN target AS t ON l.relation = t.rel
    LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
    WHERE l.locktype = 'relation'
      AND l.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
      AND l.pid IS DISTINCT FROM pg_backend_pid()
      AND (t.any_mode OR l.mode = 'AccessExclusiveLock')
)
SELECT 'locks.conflicting_lock' AS code,
       'warning' AS severity,
       relation AS object,
       count(*) AS count,
       coalesce(jsonb_agg(jsonb_build_object(
                    'pid', pid, 'mode', mode, 'granted', granted,
                    'preparedTransaction', pid IS NULL, 'virtualTransaction', virtualtransaction,
                    'applicationName', application_name, 'state', state,
                    'xactStart', xact_start) ORDER BY n)
                FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true),
                                                   ''), '10')::int),
                '[]'::jsonb) AS samples
FROM held
GROUP BY relation
ORDER BY relation;
