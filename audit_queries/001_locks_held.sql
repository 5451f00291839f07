-- check:    locks.conflicting_lock (warning)
-- applies-to: 001 002 003
-- guard:    no (advisory: preflight only; under the migration's own locks nothing else holds one)
-- What:     locks that other sessions (or forgotten prepared transactions) hold or await on the
--           tables the pending migrations lock, in a mode that conflicts with the migration's
--           own (PostgreSQL's table-lock conflict table): the pending revisions' lock budgets,
--           in the setting queueguard.lock_budget (required; a JSON object table -> mode, e.g.
--           SET queueguard.lock_budget = '{"tasks": "ACCESS EXCLUSIVE", "executions":
--           "ACCESS SHARE"}'). The migration would queue behind them and give up at its
--           lock_timeout. One row per table.
-- Cost:     reads pg_locks and pg_stat_activity (shared memory views; no table is read).
-- Locks:    none on any table. Read-only; no row when nothing conflicts.
WITH target AS (
    SELECT b.key AS name, b.value AS mode, to_regclass(b.key) AS rel
    FROM jsonb_each_text(current_setting('queueguard.lock_budget')::jsonb) AS b
), conflicts (mode, held) AS (
    -- PostgreSQL's table-level lock conflict table: a requested mode and each held mode
    -- (by lock level, 1 ACCESS SHARE … 8 ACCESS EXCLUSIVE) it conflicts with.
    SELECT w.mode, h.held
    FROM (VALUES ('ACCESS SHARE', ARRAY[8]), ('ROW SHARE', ARRAY[7, 8]),
                 ('ROW EXCLUSIVE', ARRAY[5, 6, 7, 8]),
                 ('SHARE UPDATE EXCLUSIVE', ARRAY[4, 5, 6, 7, 8]),
                 ('SHARE', ARRAY[3, 4, 6, 7, 8]), ('SHARE ROW EXCLUSIVE', ARRAY[3, 4, 5, 6, 7, 8]),
                 ('EXCLUSIVE', ARRAY[2, 3, 4, 5, 6, 7, 8]),
                 ('ACCESS EXCLUSIVE', ARRAY[1, 2, 3, 4, 5, 6, 7, 8])) AS w (mode, levels)
    JOIN (VALUES (1, 'AccessShareLock'), (2, 'RowShareLock'), (3, 'RowExclusiveLock'),
                 (4, 'ShareUpdateExclusiveLock'), (5, 'ShareLock'), (6, 'ShareRowExclusiveLock'),
                 (7, 'ExclusiveLock'), (8, 'AccessExclusiveLock')) AS h (level, held)
      ON h.level = ANY (w.levels)
), held AS (
    SELECT t.name AS relation, l.pid, l.mode, l.granted, l.virtualtransaction,
           a.application_name, a.state, a.xact_start,
           row_number() OVER (PARTITION BY t.name
                              ORDER BY l.granted DESC, a.xact_start NULLS LAST, l.pid) AS n
    FROM pg_locks AS l
    JOIN target AS t ON l.relation = t.rel
    JOIN conflicts AS c ON c.mode = t.mode AND c.held = l.mode
    LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid
    WHERE l.locktype = 'relation'
      AND l.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
      AND l.pid IS DISTINCT FROM pg_backend_pid()
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
