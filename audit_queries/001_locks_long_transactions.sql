-- check:    locks.long_transaction (warning)
-- applies-to: 001 002 003
-- guard:    no (advisory: preflight only)
-- What:     transactions open for longer than queueguard.long_transaction_s (default 60 s)
--           that hold a lock on a table the pending migrations lock (any mode on tasks,
--           task_queues, runtime_protocol; ACCESS EXCLUSIVE on executions), including prepared
--           transactions. The migration would wait for them to end, likely past its
--           lock_timeout: end them (or wait) before upgrading. One row per table.
--           Start times of other roles' sessions are only visible to members of
--           pg_read_all_stats (see runtime.activity_hidden).
-- Cost:     reads pg_locks, pg_stat_activity and pg_prepared_xacts (no table is read).
-- Locks:    none on any table. Read-only; no row when there is no such transaction.
WITH target AS (
    SELECT t.name, t.any_mode, to_regclass(t.name) AS rel
    FROM (VALUES ('tasks', true), ('task_queues', true), ('runtime_protocol', true),
                 ('executions', false)) AS t (name, any_mode)
), holders AS (
    SELECT DISTINCT t.name AS relation, l.pid, l.virtualtransaction,
           coalesce(a.xact_start, p.prepared) AS started,
           a.application_name, a.state, p.gid
    FROM pg_locks AS l
    JOIN target AS t ON l.relation = t.rel
    LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
    LEFT JOIN pg_prepared_xacts AS p
           ON l.pid IS NULL AND l.virtualtransaction = '-1/' || p.transaction::text
    WHERE l.locktype = 'relation'
      AND l.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
      AND l.pid IS DISTINCT FROM pg_backend_pid()
      AND (t.any_mode OR l.mode = 'AccessExclusiveLock')
), long AS (
    SELECT h.*, row_number() OVER (PARTITION BY relation ORDER BY started, pid) AS n
    FROM holders AS h
    WHERE started < now() - make_interval(secs => coalesce(
              nullif(current_setting('queueguard.long_transaction_s', true), ''), '60')::float8)
)
SELECT 'locks.long_transaction' AS code,
       'warning' AS severity,
       relation AS object,
       count(*) AS count,
       coalesce(jsonb_agg(jsonb_build_object(
                    'pid', pid, 'preparedTransaction', gid, 'applicationName', application_name,
                    'state', state, 'xactStart', started,
                    'ageSeconds', round(extract(epoch FROM now() - started)::numeric, 1))
                ORDER BY n)
                FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true),
                                                   ''), '10')::int),
                '[]'::jsonb) AS samples
FROM long
GROUP BY relation
ORDER BY relation;
